"""``kubectl nfd rules test --cluster`` at scale: 10,000 nodes, each with its own
features (the upstream baseline node plus its own name), held by a master; the client
lists the cluster's NodeFeatureRules from the fake API server and reads the nodes'
features from the master through the fake API server's service proxy, as it would in a
cluster. Prints the client's wall time, the master's CPU seconds spent answering, and
heartbeat latency on the master while the client runs (against none running).

The master (``--no-publish --no-auth``, memory mode) on CPU 0; the fake API server, the
load and the client on CPU 1.

Usage: python bench/cluster_rules_bench.py [--nodes 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from master_bench import (
    cpu_s,
    env,
    features_template,
    free_port,
    heartbeat_latencies,
    pin_self,
    put_all,
    start_master,
    stop,
)

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "bench" / "data" / "master-rules.yaml"
sys.path.insert(0, str(REPO))

from tests.fakeapi import FakeApiServer  # noqa: E402

CLIENT = "import sys; from nfd.commands.kubectl import main; sys.exit(main())"


def proposed(tmp: Path) -> Path:
    """The cluster's rules with one label's value changed and a rule added."""
    (obj,) = list(yaml.safe_load_all(RULES.read_text()))
    for rule in obj["spec"]["rules"]:
        if rule.get("labels"):
            rule["labels"] = {k: v for k, v in rule["labels"].items()} | {"bench-new": "yes"}
    obj["spec"]["rules"].append(
        {
            "name": "kernel major",
            "labels": {"bench-kernel-major": "@kernel.version.major"},
            "matchFeatures": [{"feature": "kernel.version", "matchExpressions": {"major": {"op": "Exists"}}}],
        }
    )
    out = tmp / "proposed.yaml"
    out.write_text(yaml.safe_dump(obj))
    return out


def heartbeats_during(
    port: int, names: list[str], digests: dict[str, str], stop_flag: threading.Event
) -> list[float]:
    return asyncio.run(heartbeat_latencies(port, names, digests, lambda: not stop_flag.is_set(), 0.002))


def p(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    pin_self(1)
    port = free_port()
    master = start_master(port, "--no-publish")
    names = [f"node-{i:05d}" for i in range(a.nodes)]
    with FakeApiServer() as fake, tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        fake.service_backends[("node-feature-discovery", "https:nfd-master:8080")] = (
            "http",
            "127.0.0.1",
            port,
        )
        fake.objects.create("nodefeaturerules", yaml.safe_load(RULES.read_text()))
        kubeconfig = fake.write_kubeconfig(tmp / "kubeconfig")
        t0 = time.perf_counter()
        digests = asyncio.run(put_all(port, names, features_template()))
        print(f"{a.nodes} nodes PUT in {time.perf_counter() - t0:.1f} s")
        rules = proposed(tmp)
        idle = threading.Event()
        base_lat: list[float] = []
        th = threading.Thread(target=lambda: base_lat.extend(heartbeats_during(port, names, digests, idle)))
        th.start()
        time.sleep(3)
        idle.set()
        th.join()
        cmd = [sys.executable, "-c", CLIENT, "rules", "test", "--cluster", "-f", str(rules),
               "--kubeconfig", str(kubeconfig), "-o", "json"]  # fmt: skip
        walls, master_cpu, lat = [], [], []
        for _ in range(a.runs):
            stop_flag = threading.Event()
            run_lat: list[float] = []
            th = threading.Thread(
                target=lambda lat=run_lat, flag=stop_flag: lat.extend(
                    heartbeats_during(port, names, digests, flag)
                )
            )
            th.start()
            c0, t0 = cpu_s(master.pid), time.perf_counter()
            out = subprocess.run(cmd, env=env(), capture_output=True, check=False)
            walls.append(time.perf_counter() - t0)
            master_cpu.append(cpu_s(master.pid) - c0)
            stop_flag.set()
            th.join()
            lat += run_lat
            if out.returncode != 0:
                raise SystemExit(out.stderr.decode()[-2000:])
            doc = json.loads(out.stdout)
            changed = sum(1 for d in doc["nodes"] if d["added"] or d["changed"] or d["removed"])
            assert len(doc["nodes"]) == a.nodes, len(doc["nodes"])
        print(
            f"rules test --cluster over {a.nodes} nodes: wall {statistics.median(walls):.2f} s "
            f"(runs {', '.join(f'{w:.2f}' for w in walls)}), {changed} nodes would change, "
            f"{len(out.stdout) / 1e6:.1f} MB of JSON out"
        )
        print(
            f"master CPU per run: {statistics.median(master_cpu):.2f} s (runs {', '.join(f'{c:.2f}' for c in master_cpu)})"
        )
        print(
            f"heartbeat latency on the master: p50 {p(base_lat, 0.5):.2f} ms / p99 {p(base_lat, 0.99):.2f} ms idle, "
            f"p50 {p(lat, 0.5):.2f} ms / p99 {p(lat, 0.99):.2f} ms while the client runs"
        )
    stop(master)


if __name__ == "__main__":
    main()
