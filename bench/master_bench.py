"""nfd master benchmarks; prints figures.

1. Steady-state request rate on one core: the master (``--no-publish --no-auth``) pinned
   to CPU 0, a keep-alive load generator on the other CPU, answering heartbeats and
   unchanged full-feature PUTs (each 50 kB, the upstream baseline node's features).
2. Nodes from nothing to labelled against the fake API server (real HTTP, the real
   kubernetes client): 1,000 and 10,000 nodes, each with its own features (the baseline
   plus its own node name), labels from rules in bench/data.
3. API writes in a steady-state round: every node sends its unchanged features again.
4. The master's RSS holding 10,000 nodes.
5. Heartbeats per master CPU-second with the master holding every node, each node's in
   turn (``--seconds`` of them): they must cost no more at 50,000 nodes than at 10,000.

The master runs with the plain environment values of its container in deploy/base
(``MALLOC_ARENA_MAX``); the caller's environment overrides them.

Usage: python bench/master_bench.py [--nodes 1000,10000] [--seconds 5] [--qps 5000]
       python bench/master_bench.py --skip-rate --nodes 10000 --qps default --overload 200
       (the master's default settings; the fake API server answers patches beyond 200/s
       with 429 and Retry-After: 1, as API Priority and Fairness would)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BASELINE = REPO / "tests" / "fixtures" / "upstream-baseline" / "features.json"
RULES = REPO / "bench" / "data"
sys.path.insert(0, str(REPO))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def deployed_env() -> dict[str, str]:
    """The plain environment values of the master's container in deploy/base: the
    master runs here as it is deployed (glibc's arenas, for one)."""
    import yaml

    doc = yaml.safe_load((REPO / "deploy/base/master/deployment.yaml").read_text())
    (c,) = [c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "nfd-master"]
    return {e["name"]: e["value"] for e in c["env"] if "value" in e}


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


def start_master(
    port: int, *extra: str, cpu: int | None = 0, timeout: float = 30.0
) -> subprocess.Popen[bytes]:
    # NFD_BENCH_PROFILE=FILE: run the master under cProfile, stats written at its exit.
    prof = (
        ["-m", "cProfile", "-o", os.environ["NFD_BENCH_PROFILE"]]
        if os.environ.get("NFD_BENCH_PROFILE")
        else []
    )
    cmd = [sys.executable, *prof, "-m", "nfd", "--log-level", "warning", "master",
           "--host", "127.0.0.1", "--port", str(port), "--no-auth", *extra]  # fmt: skip
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"nfd-master-bench-{port}.log", "w")  # noqa: SIM115
    p = subprocess.Popen(cmd, env={**deployed_env(), **env()}, stderr=log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return p
        except OSError:
            if p.poll() is not None:
                raise SystemExit(f"master exited; see {log.name}") from None
            time.sleep(0.05)
    raise SystemExit("master did not start")


def stop(p: subprocess.Popen[bytes]) -> None:
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(15)
    except subprocess.TimeoutExpired:
        p.kill()


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used (the machine may be shared: a
    rate per CPU-second of the master is what one dedicated core would give)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    """The process's RSS (or its peak, ``key`` "VmHWM"), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- a small keep-alive HTTP/1.1 load generator ----------------------------------------


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.r, self.w = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(r, w)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        return await self.exchange(request_bytes(method, path, body))

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        """Send a whole request; its answer's status and body. The head is read in one
        go (a line at a time cost the sender more CPU than the master spends on a
        heartbeat)."""
        self.w.write(request)
        head = await self.r.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        at = head.lower().find(b"\r\ncontent-length:")
        length = int(head[at + 17 : head.index(b"\r\n", at + 2)]) if at >= 0 else 0
        return status, await self.r.readexactly(length)

    def close(self) -> None:
        self.w.close()


def node_body(template: str, name: str) -> bytes:
    return template.replace("__NODE__", name).encode()


def request_bytes(method: str, path: str, body: bytes = b"") -> bytes:
    head = (f"{method} {path} HTTP/1.1\r\nHost: m\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
    return head + body


def by_ref(template: str) -> str:
    """The template with its big groups named by their hash, as a worker sends them
    (``nfd.worker.loop.REF_MIN_BYTES``)."""
    from nfd.features import Features
    from nfd.worker.loop import REF_MIN_BYTES

    body = json.loads(template)
    raw = body["features"]
    for kind, name, h, gj in Features.from_dict(raw).encoded().parts:
        if len(gj) >= REF_MIN_BYTES and "__NODE__" not in gj:
            raw[kind][name] = {"elements": None, "ref": h}
    return json.dumps(body)


def feature_requests(names: list[str], template: str) -> list[tuple[str, bytes]]:
    """Each node's features PUT as ``send_all`` sends it first, big groups by their hash
    (``by_ref``): built ahead, so that a timed pass spends the sender's CPU on sending
    only (a fleet's workers build theirs on their own nodes)."""
    refs = by_ref(template)
    return [
        (name, request_bytes("PUT", f"/api/v1/nodes/{name}/features", node_body(refs, name)))
        for name in names
    ]


def features_template() -> str:
    raw = json.loads(BASELINE.read_text())
    raw.setdefault("attributes", {})["system.name"] = {"elements": {"nodename": "__NODE__"}}
    return json.dumps({"nfdVersion": "bench", "features": raw})


async def put_all(port: int, names: list[str], template: str, conns: int = 16) -> dict[str, str]:
    """PUT every node's features; returns node -> digest."""
    return await send_all(port, feature_requests(names, template), template, conns)


async def send_all(
    port: int, requests: list[tuple[str, bytes]], template: str, conns: int = 16
) -> dict[str, str]:
    """Send each node's features PUT (``feature_requests``), whole (from ``template``)
    when the master answers 409, as a worker does; returns node -> digest."""
    digests: dict[str, str] = {}
    queue = list(reversed(requests))

    async def run() -> None:
        c = await Conn.open(port)
        try:
            while queue:
                name, request = queue.pop()
                status, body = await c.exchange(request)
                if status == 409:  # a group the master does not hold yet
                    whole = node_body(template, name)
                    status, body = await c.exchange(
                        request_bytes("PUT", f"/api/v1/nodes/{name}/features", whole)
                    )
                if status != 200:
                    raise SystemExit(f"PUT {name}: {status} {body[:200]!r}")
                digests[name] = json.loads(body)["digest"]
        finally:
            c.close()

    await asyncio.gather(*(run() for _ in range(conns)))
    return digests


async def heartbeat_latencies(
    port: int, names: list[str], digests: dict[str, str], going: Callable[[], bool], pause: float
) -> list[float]:
    """Heartbeats on one connection, round the nodes while ``going()``, ``pause`` seconds
    apart (a steady trickle, as a fleet sends them); each one's latency in seconds."""
    c = await Conn.open(port)
    lat: list[float] = []
    i = 0
    try:
        while going():
            name = names[i % len(names)]
            t0 = time.perf_counter()
            status, _ = await c.request(
                "POST", f"/api/v1/nodes/{name}/heartbeat", json.dumps({"digest": digests[name]}).encode()
            )
            lat.append(time.perf_counter() - t0)
            assert status == 200
            i += 1
            await asyncio.sleep(pause)
    finally:
        c.close()
    return lat


async def rate(port: int, make: Any, seconds: float, conns: int = 8) -> tuple[float, int]:
    """Requests per second over ``seconds`` (make(i) -> (method, path, body)); errors."""
    stop_at = time.monotonic() + seconds
    done = errors = 0

    async def run(k: int) -> None:
        nonlocal done, errors
        c = await Conn.open(port)
        i = k
        try:
            while time.monotonic() < stop_at:
                status, _ = await c.request(*make(i))
                i += conns
                done += 1
                errors += status != 200
        finally:
            c.close()

    t0 = time.monotonic()
    await asyncio.gather(*(run(k) for k in range(conns)))
    return done / (time.monotonic() - t0), errors


def pin_self(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > cpu:  # type: ignore[operator]
        os.sched_setaffinity(0, {cpu})


# -- 1. steady-state rate ---------------------------------------------------------------


def bench_rate(seconds: float) -> None:
    port = free_port()
    master = start_master(port, "--no-publish", "--rules-dir", str(RULES), cpu=0)
    try:
        pin_self(1)
        template = features_template()
        names = [f"node-{i:05d}" for i in range(200)]
        digests = asyncio.run(put_all(port, names, template))
        hb = [json.dumps({"digest": digests[n]}).encode() for n in names]
        bodies = [node_body(template, n).replace(b'"nfdVersion"', f'"digest": "{digests[n]}", "nfdVersion"'.encode(), 1) for n in names]  # fmt: skip
        for what, make in (
            ("heartbeats", lambda i: ("POST", f"/api/v1/nodes/{names[i % 200]}/heartbeat", hb[i % 200])),
            (
                "unchanged PUTs (50 kB)",
                lambda i: ("PUT", f"/api/v1/nodes/{names[i % 200]}/features", bodies[i % 200]),
            ),
        ):
            c0, t0 = cpu_s(master.pid), time.monotonic()
            r, e = asyncio.run(rate(port, make, seconds))
            used = cpu_s(master.pid) - c0
            n = r * (time.monotonic() - t0)
            print(f"{what + ':':24s} {r:7.0f} req/s wall, {n / used if used else 0:7.0f} req per master CPU-second "
                  f"(errors {e}; load average {os.getloadavg()[0]:.1f})")  # fmt: skip
    finally:
        stop(master)


# -- 2-4. labelling against the fake API server ----------------------------------------


def serve_fake(nodes: int, overload: float) -> None:
    """Child process: the fake API server with ``nodes`` Nodes (node writes over
    ``overload`` per second answered 429, when given); prints its URL, then answers
    'counts' lines on stdin with its request counters as JSON."""
    from tests.fakeapi import FakeApiServer

    with FakeApiServer() as fake:
        for i in range(nodes):
            fake.create_node(f"node-{i:05d}")
        limit = fake.faults.overload(overload, verb="patch") if overload else None
        print(fake.url, flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "counts":
                counts = {f"{v} {r}": n for (v, r), n in fake.log.counts().items()}
                counts["429s"] = limit.rejected if limit else 0
                print(json.dumps(counts), flush=True)
            elif cmd == "labelled":
                done = sum(
                    1
                    for n in fake.nodes()
                    if "nfd.node.kubernetes.io/feature-labels" in n["metadata"].get("annotations", {})
                )
                print(json.dumps(done), flush=True)  # fmt: skip
            elif cmd == "quit":
                return


def metric(port: int, name: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    m = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def bench_labelling(
    n: int, qps: float | None, tmp: Path, overload: float = 0.0, seconds: float = 5.0
) -> None:
    # The master on CPU 0; the fake API server (a child, so it inherits this) and the
    # load generator on CPU 1. Unpinned, a master started after pin_self(1) would
    # inherit CPU 1 too and all three would share one core.
    pin_self(1)
    fake = subprocess.Popen([sys.executable, __file__, "--serve-fake", str(n), "--overload", str(overload)], env=env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert fake.stdout and fake.stdin
    url = fake.stdout.readline().strip()

    def ask(cmd: str) -> Any:
        assert fake.stdout and fake.stdin
        fake.stdin.write(cmd + "\n")
        fake.stdin.flush()
        return json.loads(fake.stdout.readline())

    kubeconfig = tmp / f"kubeconfig-{n}"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "fake", "user": {"token": "bench"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
    }))  # fmt: skip
    port = free_port()
    limit = [] if qps is None else ["--kube-api-qps", str(qps), "--kube-api-burst", str(int(qps))]
    master = start_master(port, "--kubeconfig", str(kubeconfig), "--no-tls", "--no-rule-watch", "--rules-dir", str(RULES),
                          *limit, cpu=0)  # fmt: skip
    try:
        template = features_template()
        names = [f"node-{i:05d}" for i in range(n)]
        c0 = cpu_s(master.pid)
        t0 = time.monotonic()
        asyncio.run(put_all(port, names, template))
        t_put = time.monotonic() - t0
        while metric(port, "nfd_master_node_updates_total") < n:
            time.sleep(0.1)
        t_done = time.monotonic() - t0
        used = cpu_s(master.pid) - c0
        labelled = ask("labelled")
        before = ask("counts")
        print(f"(master log: {Path(os.environ.get('TMPDIR', '/tmp')) / f'nfd-master-bench-{port}.log'}; "
              f"qps {'default' if qps is None else qps}, 429s injected over {overload or 'none'}/s: "
              f"{before.pop('429s')} answered 429)")  # fmt: skip
        print(f"{n:6d} nodes labelled in  {t_done:6.1f} s wall, {used:.1f} s of master CPU (all PUTs answered "
              f"after {t_put:.1f} s; {labelled} Nodes carry labels; API requests {sum(before.values())}: {before}; "
              f"load average {os.getloadavg()[0]:.1f})")  # fmt: skip
        print(f"{n:6d} nodes: master RSS  {rss_mb(master.pid):6.0f} MiB")
        digests = asyncio.run(put_all(port, names, template))  # a steady-state round: nothing changed
        time.sleep(0.5)
        after = ask("counts")
        after.pop("429s")
        diff = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}
        writes = sum(v for k, v in diff.items() if k.split()[0] in ("patch", "update", "create", "delete"))
        print(f"{n:6d} nodes: API writes in a steady-state round: {writes} (requests {diff or 0})")
        # Heartbeats from every node in turn, the master holding them all: the steady
        # state of a fleet this size, whose cost per heartbeat must not grow with it.
        hb = [json.dumps({"digest": digests[x]}).encode() for x in names]
        c0, t0 = cpu_s(master.pid), time.monotonic()
        r, e = asyncio.run(rate(port, lambda i: ("POST", f"/api/v1/nodes/{names[i % n]}/heartbeat", hb[i % n]), seconds))  # fmt: skip
        used = cpu_s(master.pid) - c0
        print(f"{n:6d} nodes: heartbeats, every node in turn: {r:.0f}/s wall, "
              f"{r * (time.monotonic() - t0) / used if used else 0:.0f} per master CPU-second (errors {e})")  # fmt: skip
    finally:
        stop(master)
        try:
            fake.stdin.write("quit\n")
            fake.stdin.flush()
        except BrokenPipeError:
            pass
        fake.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="1000,10000")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--qps", default="5000", help="the master's client-side API rate limit, or 'default'")
    ap.add_argument("--overload", type=float, default=0.0, help="429 node writes over this rate (per second)")
    ap.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--skip-rate", action="store_true")
    a = ap.parse_args()
    if a.serve_fake is not None:
        serve_fake(a.serve_fake, a.overload)
        return
    if not a.skip_rate:
        bench_rate(a.seconds)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in a.nodes.split(",") if x):
            qps = None if a.qps == "default" else float(a.qps)
            bench_labelling(n, qps, Path(tmp), a.overload, a.seconds)


if __name__ == "__main__":
    main()
