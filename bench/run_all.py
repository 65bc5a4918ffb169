"""Run the benchmarks in bench/ and print their figures.

The long ones (the 30-minute soak, 10,000 big NodeFeature objects) and the one that needs
a real cluster run only when named: ``run_all.py --all`` adds the long ones,
``run_all.py NAME_bench.py ...`` runs just those."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Minutes each, or a kubeconfig: not part of a plain run.
LONG = {"master_soak_bench.py", "nodefeature_big_bench.py"}
NEEDS_CLUSTER = {"master_realcluster_bench.py", "apiserver_patch_bench.py"}

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--all", action="store_true", help="the long benches too (not the real-cluster one)")
    p.add_argument("names", nargs="*", help="only these bench files")
    args = p.parse_args()
    scripts = sorted(HERE.glob("*_bench.py"))
    if args.names:
        scripts = [s for s in scripts if s.name in set(args.names)]
    else:
        skip = NEEDS_CLUSTER | (set() if args.all else LONG)
        scripts = [s for s in scripts if s.name not in skip]
    failed = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        if subprocess.run([sys.executable, str(script)]).returncode != 0:
            failed.append(script.name)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")
