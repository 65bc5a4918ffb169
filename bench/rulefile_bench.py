"""A large rule file: 20,000 rules in one YAML file of about 3 MB, read and parsed into
rule sets as ``nfd rules test`` and the master's ``--rules-dir`` do.

Two loaders in the same run, each in a fresh process (peak RSS is per process):
PyYAML's pure-Python ``SafeLoader`` (the baseline) and ``nfd.yamlfile.load_all``
(libyaml's C loader where PyYAML has it). Prints parse time, rule-set time and peak RSS
of each, medians over NFD_BENCH_RUNS runs (default 3), and their ratio. Asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _venv import python_for_bench

RULES = 20_000

RULE = """    - name: rule-{i}
      labels: {{vendor.example.com/f-{i}: "true"}}
      matchFeatures:
        - feature: pci.device
          matchExpressions: {{vendor: {{op: In, value: ["8086"]}}}}
"""

CHILD = r"""
import json, resource, sys, time
path, which = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if which == "baseline":
    import yaml
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.load_all(f.read(), Loader=yaml.SafeLoader) if d is not None]
else:
    from nfd.yamlfile import load_all
    docs = load_all(path)
t1 = time.perf_counter()
from nfd.rules import load_rulesets
sets, errors = load_rulesets(docs)
t2 = time.perf_counter()
assert not errors and sum(len(s.rules) for s in sets) == int(sys.argv[3])
print(json.dumps({"parse_s": t1 - t0, "rulesets_s": t2 - t1,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_file(path: Path) -> int:
    head = "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: big}\nspec:\n  rules:\n"
    body = "".join(RULE.format(i=i, major=i % 7) for i in range(RULES))
    path.write_text(head + body)
    return path.stat().st_size


def main() -> None:
    runs = int(os.environ.get("NFD_BENCH_RUNS", "3"))
    py = python_for_bench()
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "rules.yaml"
        size = write_file(f)
        print(f"rule file: {RULES} rules, {size / 1e6:.1f} MB")
        got: dict[str, list[dict[str, float]]] = {"baseline": [], "nfd": []}
        for _ in range(runs):  # interleaved, so that load changes both alike
            for which in got:
                out = subprocess.run(
                    [py, "-c", CHILD, str(f), which, str(RULES)], capture_output=True, text=True, check=True
                )
                got[which].append(json.loads(out.stdout))
    med = {w: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for w, rs in got.items()}
    for which, label in (("baseline", "PyYAML SafeLoader"), ("nfd", "nfd.yamlfile (C loader)")):
        m = med[which]
        print(f"{label:26s} parse {m['parse_s']:6.2f} s, rule sets {m['rulesets_s']:5.2f} s, "
              f"peak RSS {m['rss_mb']:6.0f} MB")  # fmt: skip
    b, n = med["baseline"], med["nfd"]
    print(f"ratio baseline/nfd: parse {b['parse_s'] / n['parse_s']:.1f}x, "
          f"total {(b['parse_s'] + b['rulesets_s']) / (n['parse_s'] + n['rulesets_s']):.1f}x, "
          f"peak RSS {b['rss_mb'] / n['rss_mb']:.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
