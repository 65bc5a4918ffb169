"""Speed of the cpu source on this machine.

- first pass: a new CpuSource's first discover() (maps the code page, executes CPUID for
  every leaf it decodes, reads sysfs), median over fresh instances;
- cached: later discover() calls on the same instance (CPUID facts kept, sysfs re-read);
- the parts: NativeCpuid setup, CPUID decoding alone, labels().

Prints figures; asserts nothing.

    PYTHONPATH=. python bench/cpu_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nfd.config import SourcesConfig
from nfd.hostroot import HostRoot
from nfd.sources.cpu import CpuSource
from nfd.sources.cpuid_names import decode
from nfd.sources.cpuid_x86 import CpuidUnavailable, NativeCpuid


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median and p90 in milliseconds."""
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args()
    host, cfg = HostRoot.from_env(), SourcesConfig()

    def first() -> None:
        CpuSource().discover(host, cfg)

    src = CpuSource()
    feats = src.discover(host, cfg)
    rows = [
        ("first pass (new instance)", timed(first, max(args.runs // 3, 20))),
        ("cached pass (same instance)", timed(lambda: src.discover(host, cfg), args.runs)),
        ("labels()", timed(lambda: src.labels(feats, cfg), args.runs)),
    ]
    try:
        reader = NativeCpuid()
        rows.append(("  NativeCpuid() setup", timed(lambda: NativeCpuid().close(), args.runs)))
        rows.append(("  CPUID decode alone", timed(lambda: decode(reader), args.runs)))
    except CpuidUnavailable as e:
        print(f"(CPUID not executable here: {e})")
    st = src.static_facts(host)
    print(f"cpu source on {st.arch}, vendor {st.vendor} family {st.family} model {st.model}, "
          f"{len(st.flags)} cpuid flags, {len(src.labels(feats, cfg))} labels")  # fmt: skip
    print(f"{'':32} {'median ms':>10} {'p90 ms':>10}")
    for name, (med, p90) in rows:
        print(f"{name:32} {med:10.3f} {p90:10.3f}")


if __name__ == "__main__":
    main()
