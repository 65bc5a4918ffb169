"""Per-source discovery time, in-process.

    python bench/sources_bench.py [--passes N] [--root DIR]

Prints, for each built-in source, the median time of one ``discover()`` (and of
``labels()``), then the median of one pass over the file-based sources together (every
source but cpu and custom) and of a full pass over all sources (cpu included). The
first pass is printed apart: it includes the kernel config's decompression and parse,
which later passes reuse while the file's bytes are unchanged. ``--root`` (or
``NFD_HOST_ROOT``) points the sources at a fixture tree instead of this machine.
Asserts nothing; target: a full pass <= 5 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nfd.config import WorkerConfig
from nfd.discovery import discover
from nfd.hostroot import HostRoot
from nfd.sources import default_registry

NOT_FILE_BASED = ("cpu", "custom")


def median_ms(fn: Callable[[], object], passes: int) -> float:
    times = []
    for _ in range(passes):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=200)
    ap.add_argument("--root", help="a tree laid out like / (default: NFD_HOST_ROOT or /)")
    args = ap.parse_args()
    host = HostRoot.under(args.root) if args.root else HostRoot.from_env()
    cfg = WorkerConfig()
    sources = list(default_registry())
    mine = [s for s in sources if s.name not in NOT_FILE_BASED]

    t0 = time.perf_counter()
    first = discover(sources, host, cfg.sources)
    first_ms = (time.perf_counter() - t0) * 1e3
    print(f"first pass, all sources (cold caches): {first_ms:.3f} ms")
    for name, secs in first.durations.items():
        print(f"  first {name:<8} {secs * 1e3:8.3f} ms")

    print(f"\nmedian of {args.passes} passes          discover    labels")
    for src in sources:
        features = src.discover(host, cfg.sources)
        d = median_ms(lambda s=src: s.discover(host, cfg.sources), args.passes)  # type: ignore[misc]
        lab = median_ms(lambda s=src, f=features: s.labels(f, cfg.sources), args.passes)  # type: ignore[misc]
        print(f"  {src.name:<32} {d:8.3f} ms {lab:8.3f} ms")
    file_based = median_ms(lambda: discover(mine, host, cfg.sources), args.passes)
    full = median_ms(lambda: discover(sources, host, cfg.sources), args.passes)
    print(f"\n  file-based sources together ({', '.join(s.name for s in mine)}): {file_based:.3f} ms")
    print(f"  full pass, all sources ({', '.join(s.name for s in sources)}): {full:.3f} ms  (target <= 5 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
