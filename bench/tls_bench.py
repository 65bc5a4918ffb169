"""What TLS (now the default) costs the master; prints figures.

The same master (``--no-publish --no-auth``, pinned to CPU 0) served once with the
certificate it would make for itself (ECDSA P-256, from nfd.master.security.certs) and once with
``--no-tls``; the client runs on CPU 1. Blocks alternate between the two, several
rounds, and medians are compared within the run, both as requests per wall second and
as the master's CPU time per request (the machine may be shared with other work):

1. heartbeats over one kept-alive connection (a worker's steady state);
2. a new connection per heartbeat (handshake included: a worker after the master
   dropped its idle connection, or a restart of every worker).

Usage: python bench/tls_bench.py [--seconds 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.master_bench import cpu_s, free_port, start_master, stop
from nfd.master.security import certs

NODE = "bench-node"


def make_cert(tmp: Path) -> tuple[Path, Path, Path]:
    now = dt.datetime.now(dt.UTC)
    ca = certs.new_ca(days=1, now=now)
    cert, key = certs.issue(*ca, dns_names=["localhost"], ips=["127.0.0.1"], days=1, now=now)
    paths = tmp / "ca.crt", tmp / "tls.crt", tmp / "tls.key"
    for p, data in zip(paths, (ca[0], cert, key), strict=True):
        p.write_bytes(data)
    return paths


def connect(port: int, ctx: ssl.SSLContext | None) -> http.client.HTTPConnection:
    if ctx is None:
        return http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)


def seed(port: int, ctx: ssl.SSLContext | None) -> bytes:
    c = connect(port, ctx)
    c.request("PUT", f"/api/v1/nodes/{NODE}/features", body=json.dumps({"features": {}}),
              headers={"Content-Type": "application/json"})  # fmt: skip
    digest = json.loads(c.getresponse().read())["digest"]
    c.close()
    return json.dumps({"digest": digest}).encode()


def beat(c: http.client.HTTPConnection, body: bytes) -> None:
    c.request(
        "POST", f"/api/v1/nodes/{NODE}/heartbeat", body=body, headers={"Content-Type": "application/json"}
    )
    r = c.getresponse()
    r.read()
    assert r.status == 200, r.status


def kept_alive(port: int, ctx: ssl.SSLContext | None, body: bytes, seconds: float) -> int:
    c = connect(port, ctx)
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        beat(c, body)
        n += 1
    c.close()
    return n


def fresh_each(port: int, ctx: ssl.SSLContext | None, body: bytes, seconds: float) -> int:
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        c = connect(port, ctx)
        beat(c, body)
        c.close()
        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > 1:  # type: ignore[operator]
        os.sched_setaffinity(0, {1})
    tmp = Path(tempfile.mkdtemp(prefix="nfd-tls-bench-"))
    ca, cert, key = make_cert(tmp)
    ctx = ssl.create_default_context(cafile=str(ca))
    ports = {"plain": free_port(), "tls": free_port()}
    procs = {
        "plain": start_master(ports["plain"], "--no-publish", "--no-tls"),
        "tls": start_master(
            ports["tls"], "--no-publish", "--tls-cert-file", str(cert), "--tls-key-file", str(key)
        ),
    }
    try:
        ctxs = {"plain": None, "tls": ctx}
        bodies = {k: seed(ports[k], ctxs[k]) for k in ports}
        rate: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        for _ in range(a.rounds):
            for kind in ("plain", "tls"):
                for what, fn in (("kept-alive", kept_alive), ("new connection", fresh_each)):
                    c0 = cpu_s(procs[kind].pid)
                    n = fn(ports[kind], ctxs[kind], bodies[kind], a.seconds)
                    cpu.setdefault((what, kind), []).append((cpu_s(procs[kind].pid) - c0) / n * 1e3)
                    rate.setdefault((what, kind), []).append(n / a.seconds)
        print(
            f"heartbeats, medians of {a.rounds} interleaved {a.seconds:g} s blocks (master on CPU 0, client on CPU 1)"
        )
        for what in ("kept-alive", "new connection"):
            r = {k: statistics.median(rate[(what, k)]) for k in ("plain", "tls")}
            ms = {k: statistics.median(cpu[(what, k)]) for k in ("plain", "tls")}
            print(f"  {what:15} req/s plain {r['plain']:6.0f} TLS {r['tls']:6.0f} (x{r['tls'] / r['plain']:.2f});"
                  f"  master CPU ms/req plain {ms['plain']:.2f} TLS {ms['tls']:.2f} (x{ms['tls'] / ms['plain']:.2f})")  # fmt: skip
    finally:
        for p in procs.values():
            stop(p)


if __name__ == "__main__":
    main()
