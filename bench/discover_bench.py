"""Discovery speed and size.

1. One discovery pass in-process (all default sources, labels included): median and p90
   of many passes, after a first pass that fills one-time caches (CPUID).
2. `nfd discover` as a whole process: median wall time and peak RSS over repeated runs.

Both in a clean venv with nfd installed from this checkout. Prints figures; asserts
nothing (targets: pass <= 5 ms, process <= 40 ms and <= 35 MB).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _venv import python_for_bench

IN_PROCESS = r"""
import json, statistics, sys, time
t0 = time.perf_counter()
from nfd.config import WorkerConfig
from nfd.discovery import discover
from nfd.hostroot import HostRoot
from nfd.labels import node_labels
from nfd.sources import default_registry
import_s = time.perf_counter() - t0
reg = default_registry(); cfg = WorkerConfig(); host = HostRoot.from_env()
srcs = list(reg)
t0 = time.perf_counter(); r = discover(srcs, host, cfg.sources); first = time.perf_counter() - t0
times, per = [], {}
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    r = discover(srcs, host, cfg.sources)
    labels = node_labels(srcs, r.features, cfg).labels
    times.append(time.perf_counter() - t0)
    for k, v in r.durations.items():
        per.setdefault(k, []).append(v)
times.sort()
print(json.dumps({
    "import_ms": import_s * 1e3, "first_pass_ms": first * 1e3,
    "median_ms": statistics.median(times) * 1e3, "p90_ms": times[int(len(times) * 0.9)] * 1e3,
    "labels": len(labels), "errors": r.errors,
    "per_source_median_ms": {k: statistics.median(v) * 1e3 for k, v in per.items()},
}))
"""


def run_process(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed")
    return wall, usage.ru_maxrss


def main() -> None:
    passes = int(os.environ.get("NFD_BENCH_PASSES", "200"))
    runs = int(os.environ.get("NFD_BENCH_RUNS", "30"))
    py = python_for_bench()
    out = subprocess.run([py, "-c", IN_PROCESS, str(passes)], capture_output=True, text=True, check=True)
    ip = json.loads(out.stdout)
    print(f"in-process pass ({passes} passes): median {ip['median_ms']:.2f} ms, p90 {ip['p90_ms']:.2f} ms, "
          f"first {ip['first_pass_ms']:.2f} ms, import {ip['import_ms']:.1f} ms, {ip['labels']} labels")  # fmt: skip
    for k, v in sorted(ip["per_source_median_ms"].items(), key=lambda kv: -kv[1]):
        print(f"  {k:10s} {v:7.3f} ms")
    if ip["errors"]:
        print(f"  source errors: {ip['errors']}")

    nfd = str(Path(py).parent / "nfd")
    run_process([nfd, "discover"])  # warm the page cache
    walls, rss = [], []
    for _ in range(runs):
        w, r = run_process([nfd, "discover"])
        walls.append(w)
        rss.append(r)
    py_walls = [run_process([py, "-c", "pass"])[0] for _ in range(runs)]
    print(f"nfd discover process ({runs} runs): median wall {statistics.median(walls) * 1e3:.1f} ms "
          f"(min {min(walls) * 1e3:.1f}), peak RSS {max(rss) / 1024:.1f} MB "
          f"(median {statistics.median(rss) / 1024:.1f}); bare python startup {statistics.median(py_walls) * 1e3:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
