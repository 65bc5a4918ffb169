"""GET /api/v1/nodes at scale: page times, the master's peak RSS, and heartbeat latency
while 16 clients page through every node at once (against the same heartbeats with no
reads, in the same run).

The master (``--no-publish --no-auth``, memory mode) on CPU 0; the clients on CPU 1.

Usage: python bench/master_reads_bench.py [--nodes 10000] [--seconds 10] [--readers 16] [--limit 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from master_bench import (
    Conn,
    features_template,
    free_port,
    heartbeat_latencies,
    pin_self,
    put_all,
    start_master,
    stop,
)

RULES = Path(__file__).resolve().parent / "data"


def vm(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def walk(port: int, limit: int) -> tuple[int, list[float]]:
    """Every node, page by page; (nodes seen, each page's seconds)."""
    c = await Conn.open(port)
    seen, times, cont = 0, [], ""
    try:
        while True:
            t0 = time.perf_counter()
            status, body = await c.request(
                "GET", f"/api/v1/nodes?limit={limit}" + (f"&continue={cont}" if cont else "")
            )
            times.append(time.perf_counter() - t0)
            assert status == 200, (status, body[:200])
            page = json.loads(body)
            seen += len(page["items"])
            cont = page["metadata"]["continue"]
            if not cont:
                return seen, times
    finally:
        c.close()


async def heartbeats(port: int, names: list[str], digests: dict[str, str], seconds: float) -> list[float]:
    stop_at = time.monotonic() + seconds
    return await heartbeat_latencies(port, names, digests, lambda: time.monotonic() < stop_at, 0.001)


async def during_reads(
    port: int, names: list[str], digests: dict[str, str], seconds: float, readers: int, limit: int
) -> tuple[list[float], int]:
    stop = asyncio.Event()
    walks = 0

    async def reader() -> None:
        nonlocal walks
        while not stop.is_set():
            await walk(port, limit)
            walks += 1

    tasks = [asyncio.create_task(reader()) for _ in range(readers)]
    await asyncio.sleep(0.5)  # every reader under way
    lat = await heartbeats(port, names, digests, seconds)
    stop.set()
    await asyncio.gather(*tasks)
    return lat, walks


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--readers", type=int, default=16)
    ap.add_argument("--limit", type=int, default=100)
    a = ap.parse_args()
    port = free_port()
    master = start_master(port, "--no-publish", "--rules-dir", str(RULES), cpu=0)
    try:
        pin_self(1)
        names = [f"node-{i:05d}" for i in range(a.nodes)]
        digests = asyncio.run(put_all(port, names, features_template()))
        rss0 = vm(master.pid, "VmRSS")
        seen, times = asyncio.run(walk(port, a.limit))
        assert seen == a.nodes
        print(f"{a.nodes} nodes, limit {a.limit}: one page median {statistics.median(times) * 1000:.1f} ms, "
              f"max {max(times) * 1000:.1f} ms; a full walk ({len(times)} pages) {sum(times):.2f} s")  # fmt: skip
        quiet = asyncio.run(heartbeats(port, names, digests, a.seconds))
        busy, walks = asyncio.run(during_reads(port, names, digests, a.seconds, a.readers, a.limit))
        print(
            f"heartbeats alone:        p50 {pct(quiet, 50):6.2f} ms  p99 {pct(quiet, 99):6.2f} ms  max {max(quiet) * 1000:6.1f} ms  ({len(quiet)})"
        )
        print(f"during {a.readers} parallel walks: p50 {pct(busy, 50):6.2f} ms  p99 {pct(busy, 99):6.2f} ms  max {max(busy) * 1000:6.1f} ms  "
              f"({len(busy)}; {walks} full walks done; p99 ratio {pct(busy, 99) / pct(quiet, 99):.1f}x)")  # fmt: skip
        print(f"master RSS: {rss0:.0f} MB holding the nodes, peak {vm(master.pid, 'VmHWM'):.0f} MB "
              f"(after the reads {vm(master.pid, 'VmRSS'):.0f} MB)")  # fmt: skip
    finally:
        stop(master)


if __name__ == "__main__":
    main()
