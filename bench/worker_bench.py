"""Worker steady state: memory after an hour's worth of passes, CPU per unchanged pass.

A real ``nfd master --no-publish --no-auth`` on a loopback port, and ``nfd worker`` with
every default source (this machine's real /sys, /proc ...) running passes at a short
interval, so that 60 passes (an hour at the default 60 s) take seconds.

1. RSS (VmRSS, and the peak VmHWM) of the worker process after 60 unchanged passes,
   then again after 600 (ten hours' worth) to show it does not grow.
2. CPU time (user + system, from /proc/PID/stat) per unchanged pass, over passes 10-60:
   discovery, digest, heartbeat and scheduling together.
3. In-process breakdown of one unchanged pass: discovery, digest, heartbeat round trip.

Usage: python bench/worker_bench.py [--passes 60] [--interval 0.05] [--config FILE]
(``--config``: the worker reads that nfd-worker.conf, as a deployed worker does)
(NFD_BENCH_PYTHON picks the interpreter; default: this one, with this checkout first on
PYTHONPATH).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# `nfd worker` with the floor on --sleep-interval (1 s) lifted, so that an hour's worth of
# passes takes seconds: for this measurement only.
FAST_WORKER = (
    "import sys, nfd.commands.worker as w; w.MIN_SLEEP_INTERVAL_S = 0.0\n"
    "from nfd.cli import main\n"
    "sys.exit(main(sys.argv[1:]))"
)

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("NFD_") and k != "NODE_NAME"}
    e["PYTHONPATH"] = str(REPO)
    return e


def wait_for(url: str, pred, timeout: float = 60.0) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            body = urllib.request.urlopen(url, timeout=1).read().decode()
            if pred(body):
                return body
        except OSError:
            pass
        time.sleep(0.5)  # seldom: scraping costs the worker CPU too
    raise SystemExit(f"timed out waiting on {url}")


def heartbeats(body: str) -> int:
    for line in body.splitlines():
        if line.startswith('nfd_worker_master_requests_total{kind="heartbeat",result="ok"}'):
            return int(float(line.split()[-1]))
    return 0


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
            out[key] = int(rest.split()[0])
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=60)
    ap.add_argument("--long-passes", type=int, default=600)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--config", metavar="FILE", help="the worker's nfd-worker.conf")
    args = ap.parse_args()
    py = os.environ.get("NFD_BENCH_PYTHON") or sys.executable

    mport, wport = free_port(), free_port()
    master_url = f"http://127.0.0.1:{mport}"
    metrics_url = f"http://127.0.0.1:{wport}/metrics"
    master = subprocess.Popen(
        [py, "-m", "nfd", "master", "--no-publish", "--no-auth", "--host", "127.0.0.1", "--port", str(mport)],
        env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    worker = None
    try:
        wait_for(master_url + "/healthz", lambda b: True)
        worker = subprocess.Popen(
            [py, "-c", FAST_WORKER, "worker", "--master", master_url, "--node-name", "bench-node",
             "--sleep-interval", f"{args.interval}s", "--port", str(wport), "--status-host", "127.0.0.1",
             *(["--config", args.config] if args.config else [])],
            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for(metrics_url, lambda b: heartbeats(b) >= 10)
        cpu0, hb0 = cpu_seconds(worker.pid), heartbeats(urllib.request.urlopen(metrics_url).read().decode())
        wait_for(metrics_url, lambda b: heartbeats(b) >= args.passes)
        cpu1, hb1 = cpu_seconds(worker.pid), heartbeats(urllib.request.urlopen(metrics_url).read().decode())
        st60 = proc_status(worker.pid)
        wait_for(metrics_url, lambda b: heartbeats(b) >= args.long_passes, timeout=600)
        st600 = proc_status(worker.pid)
        hb2 = heartbeats(urllib.request.urlopen(metrics_url).read().decode())
        cpu2 = cpu_seconds(worker.pid)
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(10)
        master.send_signal(signal.SIGTERM)
        master.wait(10)

    mb = 1024.0  # kB (as /proc says; KiB in fact) to MiB
    print("nfd worker steady state (all default sources, real master, loopback)")
    print(f"  RSS after {args.passes} passes:   {st60['VmRSS'] / mb:6.1f} MiB = {st60['VmRSS'] * 1.024 / 1000:.1f} MB  (peak {st60['VmHWM'] / mb:.1f} MiB, "
          f"anon {st60['RssAnon'] / mb:.1f} MiB, file {st60['RssFile'] / mb:.1f} MiB, {st60['Threads']} threads)")  # fmt: skip
    print(f"  RSS after {hb2} passes:  {st600['VmRSS'] / mb:6.1f} MiB  (peak {st600['VmHWM'] / mb:.1f} MiB)")
    print(f"  CPU per unchanged pass:  {(cpu1 - cpu0) / max(1, hb1 - hb0) * 1000:6.2f} ms  "
          f"(passes {hb0}-{hb1}, user+system, whole process)")  # fmt: skip
    print(
        f"  CPU per unchanged pass:  {(cpu2 - cpu1) / max(1, hb2 - hb1) * 1000:6.2f} ms  (passes {hb1}-{hb2})"
    )
    in_process_breakdown(
        master_cmd=[py, "-m", "nfd", "master", "--no-publish", "--no-auth", "--host", "127.0.0.1"]
    )


def in_process_breakdown(master_cmd: list[str]) -> None:
    """Where an unchanged pass spends its time, measured inside one process."""
    sys.path.insert(0, str(REPO))
    from nfd.canonical import GroupCache
    from nfd.config import WorkerConfig
    from nfd.discovery import discover
    from nfd.hostroot import HostRoot
    from nfd.sources import default_registry
    from nfd.worker.client import MasterClient
    from nfd.worker.loop import Worker

    port = free_port()
    master = subprocess.Popen([*master_cmd, "--port", str(port)], env=env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_for(f"http://127.0.0.1:{port}/healthz", lambda b: True)
        cfg = WorkerConfig()
        sources = default_registry().select(["all"])
        host = HostRoot.from_env()
        w = Worker(node="bench-inproc", sources=sources, host=host, config=cfg.sources,
                   client=MasterClient(f"http://127.0.0.1:{port}"))  # fmt: skip
        w.run_pass()
        groups = GroupCache(per_name=1)  # as the worker keeps the last pass's groups
        disc, dig, hb, whole = [], [], [], []
        for _ in range(200):
            t0 = time.process_time()
            feats = discover(sources, host, cfg.sources).features
            t1 = time.process_time()
            d = feats.digest(groups)
            t2 = time.process_time()
            w.client.heartbeat("bench-inproc", d)
            t3 = time.process_time()
            w.run_pass()
            t4 = time.process_time()
            disc.append(t1 - t0)
            dig.append(t2 - t1)
            hb.append(t3 - t2)
            whole.append(t4 - t3)
        print("  in-process, CPU per unchanged pass (median of 200):")
        for name, xs in (("discovery (all sources)", disc), ("digest", dig), ("heartbeat round trip", hb),
                         ("whole pass", whole)):  # fmt: skip
            print(f"    {name:24s} {statistics.median(xs) * 1000:6.2f} ms")
    finally:
        master.send_signal(signal.SIGTERM)
        master.wait(10)


if __name__ == "__main__":
    main()
