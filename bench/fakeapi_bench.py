"""Throughput of the fake Kubernetes API server (tests/fakeapi), driven by the real
``kubernetes`` client in this same process (as the master's tests drive it).

    python bench/fakeapi_bench.py [--nodes 10000] [--seconds 3] [--threads 10]

Prints requests/s for GET node and PATCH node (JSON Patch on labels) and PATCH
nodes/status, from one client thread and from ``--threads`` threads sharing one
ApiClient (its urllib3 pool), the same GET and PATCH over a bare http.client connection (the server's own cost), and
the time to create and LIST ``--nodes`` nodes.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

# The fake lives in the tests tree: make it importable as ``tests.fakeapi`` without
# putting the repository root (and its nfd sources) on the path.
_tests = types.ModuleType("tests")
_tests.__path__ = [str(Path(__file__).resolve().parent.parent / "tests")]
sys.modules.setdefault("tests", _tests)

from kubernetes import client  # noqa: E402

from tests.fakeapi import FakeApiServer  # noqa: E402


def _rate(fn: Any, seconds: float, threads: int) -> tuple[float, int]:
    stop = time.monotonic() + seconds
    counts = [0] * threads

    def loop(i: int) -> None:
        n = 0
        while time.monotonic() < stop:
            fn(i, n)
            n += 1
        counts[i] = n

    ts = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    total = sum(counts)
    return total / (time.perf_counter() - t0), total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=10)
    args = ap.parse_args()

    with FakeApiServer() as api:
        t0 = time.perf_counter()
        for i in range(args.nodes):
            api.create_node(f"node-{i:05d}")
        created = time.perf_counter() - t0
        conf = api.configuration()
        conf.connection_pool_maxsize = max(args.threads, 1)
        api_client = client.ApiClient(conf)
        v1 = client.CoreV1Api(api_client)
        names = [f"node-{i:05d}" for i in range(args.nodes)]

        def get(i: int, n: int) -> None:
            v1.read_node(names[(i * 7919 + n) % len(names)])

        def patch(i: int, n: int) -> None:
            name = names[(i * 7919 + n) % len(names)]
            v1.patch_node(
                name,
                [
                    {
                        "op": "add",
                        "path": "/metadata/labels/feature.node.kubernetes.io~1bench",
                        "value": str(n % 97),
                    }
                ],
            )

        def patch_status(i: int, n: int) -> None:
            name = names[(i * 7919 + n) % len(names)]
            v1.patch_node_status(
                name, [{"op": "add", "path": "/status/capacity/example.com~1bench", "value": str(n % 97)}]
            )

        print(
            f"fake API server bench: {args.nodes} nodes (store filled in {created:.2f} s, direct), real kubernetes client"
        )
        for label, fn in (
            ("GET node", get),
            ("PATCH node labels (json-patch)", patch),
            ("PATCH nodes/status (json-patch)", patch_status),
        ):
            for threads in (1, args.threads):
                rate, total = _rate(fn, args.seconds, threads)
                print(f"  {label:34s} {threads:2d} thread(s): {rate:8.0f} req/s ({total} requests)")
        # The server alone: a bare keep-alive http.client connection, no models.
        conn = http.client.HTTPConnection("127.0.0.1", api.port)
        for label, method in (
            ("raw GET node (http.client)", "GET"),
            ("raw PATCH node (http.client)", "PATCH"),
        ):
            n, stop = 0, time.monotonic() + args.seconds
            t0 = time.perf_counter()
            while time.monotonic() < stop:
                body = json.dumps([{"op": "add", "path": "/metadata/labels/raw", "value": str(n % 97)}])
                conn.request(
                    method,
                    f"/api/v1/nodes/{names[n % len(names)]}",
                    body=body if method == "PATCH" else None,
                    headers={"Content-Type": "application/json-patch+json", "Accept": "application/json"},
                )
                resp = conn.getresponse()
                resp.read()
                n += 1
            print(f"  {label:34s}  1 thread(s): {n / (time.perf_counter() - t0):8.0f} req/s ({n} requests)")
        conn.close()
        t0 = time.perf_counter()
        items = v1.list_node().items
        listed = time.perf_counter() - t0
        t0 = time.perf_counter()
        raw = v1.list_node(_preload_content=False).data
        listed_raw = time.perf_counter() - t0
        print(
            f"  LIST {len(items)} nodes: {listed:.2f} s with models, {listed_raw:.2f} s raw ({len(raw) / 1e6:.1f} MB)"
        )
        api_client.close()


if __name__ == "__main__":
    main()
