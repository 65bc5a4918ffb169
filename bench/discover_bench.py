"""Discovery speed and size.

1. One discovery pass in-process (all default sources, labels included): median and p90
   of many passes, and the median CPU time (thread_time: what load on a shared machine
   changes least), after a first pass that fills one-time caches (CPUID).
2. `nfd discover` as a whole process: median wall time and peak RSS over repeated runs,
   interleaved with a bare `python -c pass`, and the ratio of the two.

Both in a clean venv with nfd installed from this checkout; NFD_BENCH_BASELINE_PYTHON
names another install's python to measure beside it in the same run. Prints figures;
asserts nothing (targets: pass <= 4.5 ms; the process is reported as a ratio to a bare
`python -c pass`, goal <= 5x).
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
try:
    from nfd.discovery import discover
except ImportError:  # an install from before the discovery package (a baseline)
    from nfd.discover import discover
from nfd.hostroot import HostRoot
from nfd.labels import node_labels
from nfd.sources import default_registry
import_s = time.perf_counter() - t0
reg = default_registry(); cfg = WorkerConfig(); host = HostRoot.from_env()
srcs = list(reg)
t0 = time.perf_counter(); r = discover(srcs, host, cfg.sources); first = time.perf_counter() - t0
times, cpu, per = [], [], {}
for _ in range(int(sys.argv[1])):
    t0, c0 = time.perf_counter(), time.thread_time()
    r = discover(srcs, host, cfg.sources)
    labels = node_labels(srcs, r.features, cfg).labels
    times.append(time.perf_counter() - t0)
    cpu.append(time.thread_time() - c0)
    for k, v in r.durations.items():
        per.setdefault(k, []).append(v)
times.sort()
print(json.dumps({
    "import_ms": import_s * 1e3, "first_pass_ms": first * 1e3,
    "median_ms": statistics.median(times) * 1e3, "p90_ms": times[int(len(times) * 0.9)] * 1e3,
    "cpu_median_ms": statistics.median(cpu) * 1e3,
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


def in_process(py: str, passes: int) -> dict[str, object]:
    out = subprocess.run([py, "-c", IN_PROCESS, str(passes)], capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def main() -> None:
    passes = int(os.environ.get("NFD_BENCH_PASSES", "200"))
    runs = int(os.environ.get("NFD_BENCH_RUNS", "30"))
    py = python_for_bench()
    # Another install to compare with in the same run (say, the previous release's venv).
    base_py = os.environ.get("NFD_BENCH_BASELINE_PYTHON")
    pythons = {"this": py, **({"baseline": base_py} if base_py else {})}
    for label, p in pythons.items():
        ip = in_process(p, passes)
        print(f"[{label}] in-process pass ({passes} passes): median {ip['median_ms']:.2f} ms, "
              f"p90 {ip['p90_ms']:.2f} ms, CPU time median {ip['cpu_median_ms']:.2f} ms, first {ip['first_pass_ms']:.2f} ms, "
              f"import {ip['import_ms']:.1f} ms, {ip['labels']} labels")  # fmt: skip
        if label == "this":
            for k, v in sorted(ip["per_source_median_ms"].items(), key=lambda kv: -kv[1]):  # type: ignore[attr-defined]
                print(f"  {k:10s} {v:7.3f} ms")
        if ip["errors"]:
            print(f"  source errors: {ip['errors']}")

    commands = {"bare": [py, "-c", "pass"]}
    for label, p in pythons.items():
        commands[label] = [str(Path(p).parent / "nfd"), "discover"]
        run_process(commands[label])  # warm the page cache
    walls: dict[str, list[float]] = {k: [] for k in commands}
    rss: dict[str, list[int]] = {k: [] for k in commands}
    for _ in range(runs):  # interleaved, so that load changes every variant alike
        for label, cmd in commands.items():
            w, r = run_process(cmd)
            walls[label].append(w)
            rss[label].append(r)
    bare = statistics.median(walls["bare"])
    print(
        f"bare python -c pass ({runs} runs): median {bare * 1e3:.1f} ms (min {min(walls['bare']) * 1e3:.1f})"
    )
    for label in pythons:
        med = statistics.median(walls[label])
        print(f"[{label}] nfd discover process: median wall {med * 1e3:.1f} ms "
              f"(min {min(walls[label]) * 1e3:.1f}) = {med / bare:.2f}x bare; "
              f"peak RSS {max(rss[label]) / 1024:.1f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
