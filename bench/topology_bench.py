"""The topology updater on the 192-CPU, 8-zone fixture node with 250 pods: API requests,
memory and CPU.

    python bench/topology_bench.py [--pods 250] [--seconds 60] [--interval 10]

Runs the installed ``nfd topology-updater`` as its own process against the fake API server
(real HTTP) and a PodResources stand-in (real gRPC on a unix socket), both in this
process. 40 of the pods are Guaranteed with 4 exclusive CPUs each; the rest are Burstable
and listed with the shared pool, as older kubelets list them (the heaviest answer).

The updater runs with the environment the overlay's container sets (``MALLOC_ARENA_MAX``;
not the ``NFD_HOST_*`` paths, which ``--host-root`` replaces), so its RSS is what the
deployed container's would be. Two phases of ``--seconds`` each: steady (nothing changes) and churn (every 2 s two pods
end and two start, through the API server and PodResources; every other step a
pinned pod comes or goes, which changes the object). Prints the updater's
API requests per minute by verb and resource; its RSS (VmRSS, VmHWM) with the same figures for a bare
interpreter that imports grpc, ssl and yaml (the floor in this environment); and CPU per
pass, in process (median over 200 passes of the same computation) and for the whole
process (utime+stime / passes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_tests = types.ModuleType("tests")
_tests.__path__ = [str(ROOT / "tests")]
sys.modules.setdefault("tests", _tests)
sys.path.insert(0, str(ROOT / "tests/topology"))

from fixture_node import RESERVED_CPUS, allocatable, pod_objects, write_sysfs, zone_cpus  # noqa: E402
from podresources_standin import PodResourcesStandIn  # noqa: E402

from nfd.hostroot import HostRoot  # noqa: E402
from nfd.topology.api.v1 import api_pb2 as pb  # noqa: E402
from tests.fakeapi import FakeApiServer  # noqa: E402

NODE = "numa-node"
GUARANTEED = 40


def workload(n: int, generation: int = 0) -> tuple[pb.ListPodResourcesResponse, list[dict[str, Any]]]:
    """``n`` pods: the first 40 pinned (4 CPUs each, zones round-robin), the rest shared.
    Each ``generation`` step swaps which shared pod is renamed (two pods end, two start), and on
    odd steps pinned pod app-0 is gone (its CPUs free: the object changes)."""
    free = {z: [c for c in zone_cpus(z) if c not in RESERVED_CPUS] for z in range(8)}
    exclusive = {c for z in range(8) for c in free[z][:20]}
    pool = [c for c in range(192) if c not in exclusive and c not in RESERVED_CPUS]
    listed, objects = [], []
    template = pod_objects(NODE)
    for i in range(n):
        if i == 0 and generation % 2 == 1:
            continue
        pinned = i < GUARANTEED
        name = (
            f"app-{i}" if pinned or i != GUARANTEED + generation % (n - GUARANTEED) else f"churn-{generation}"
        )
        ns = f"team-{i % 10}"
        if pinned:
            z = i % 8
            take = free[z][(i // 8) * 4 : (i // 8) * 4 + 4]
            listed.append(pb.PodResources(namespace=ns, name=name, containers=[
                pb.ContainerResources(name="main", cpu_ids=take, memory=[
                    pb.ContainerMemory(memory_type="memory", size=1 << 30, topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=z)]))
                ])
            ]))  # fmt: skip
            obj = {**template[0], "metadata": {"namespace": ns, "name": name}}
        else:
            listed.append(pb.PodResources(namespace=ns, name=name, containers=[
                pb.ContainerResources(name="nginx", cpu_ids=pool)
            ]))  # fmt: skip
            obj = {**template[3], "metadata": {"namespace": ns, "name": name}}
        objects.append({**obj, "spec": {**obj["spec"], "containers": [
            {**obj["spec"]["containers"][0], "name": "main" if pinned else "nginx"}
        ]}})  # fmt: skip
    return pb.ListPodResourcesResponse(pod_resources=listed), objects


def deployed_env() -> dict[str, str]:
    """The plain environment values of the overlay's updater container."""
    import yaml

    doc = yaml.safe_load(
        (ROOT / "deploy/components/topology-updater/topology-updater-daemonset.yaml").read_text()
    )
    (c,) = [c for c in doc["spec"]["template"]["spec"]["containers"] if c["name"] == "nfd-topology-updater"]
    return {e["name"]: e["value"] for e in c["env"] if "value" in e and not e["name"].startswith("NFD_HOST_")}


def rss(pid: int) -> tuple[int, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        fields[k] = v.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def cpu_seconds(pid: int) -> float:
    parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def floor_rss() -> tuple[int, int]:
    code = "import grpc, yaml, ssl, http.client, json, sys; sys.stdout.write('ok'); sys.stdout.flush(); sys.stdin.read()"
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
    assert p.stdout is not None and p.stdout.read(2) == b"ok"
    out = rss(p.pid)
    p.communicate(b"")
    return out


def counts(fake: FakeApiServer, since: int, until: int | None = None) -> Counter[tuple[str, str]]:
    """Requests over HTTP (all the updater's: the bench writes to the store directly)."""
    c: Counter[tuple[str, str]] = Counter()
    for r in fake.log.records(since=since):
        if until is None or r.seq <= until:
            c[(r.verb, r.resource)] += 1
    return c


def in_process_cpu(host: HostRoot, socket: str, n: int) -> float:
    from nfd.topology.updater import Settings, Updater

    u = Updater(Settings(NODE, host, socket, None), publish=lambda obj: False)
    samples = []
    for _ in range(n):
        t0 = time.process_time()
        u.compute()
        samples.append(time.process_time() - t0)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=250)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=10.0)
    args = ap.parse_args()

    env = deployed_env()
    work = Path(tempfile.mkdtemp(prefix="nfdtopo-", dir="/tmp"))
    try:
        host = HostRoot.under(write_sysfs(work / "host"))
        listed, objects = workload(args.pods)
        with (
            FakeApiServer() as fake,
            PodResourcesStandIn(work / "kubelet.sock", allocatable=allocatable(), pods=listed) as kubelet,
        ):
            fake.create_node(NODE)
            for obj in objects:
                fake.objects.create("pods", obj, namespace=obj["metadata"]["namespace"])
            kubeconfig = fake.write_kubeconfig(work / "kubeconfig")
            cpu_pass = in_process_cpu(host, str(kubelet.socket), 200)
            mark = fake.log.mark()
            calls0 = kubelet.calls["List"]
            proc = subprocess.Popen(
                [sys.executable, "-m", "nfd", "topology-updater", "--node-name", NODE, "--kubeconfig", str(kubeconfig),
                 "--host-root", str(work / "host"), "--podresources-socket", str(kubelet.socket),
                 "--kubelet-config", "", "--interval", str(args.interval)],
                cwd="/", stderr=subprocess.DEVNULL, env={**os.environ, **env},
            )  # fmt: skip
            try:
                fake.wait_for(
                    lambda: fake.objects.exists("noderesourcetopologies", NODE),
                    timeout=60,
                    what="first write",
                )
                time.sleep(args.interval * 2)
                steady_mark, steady_calls, cpu0 = (
                    fake.log.mark(),
                    kubelet.calls["List"],
                    cpu_seconds(proc.pid),
                )
                start_passes = steady_calls - calls0
                time.sleep(args.seconds)
                steady = counts(fake, steady_mark)
                first = counts(fake, mark, steady_mark)
                steady_passes = kubelet.calls["List"] - steady_calls
                steady_cpu = (cpu_seconds(proc.pid) - cpu0) / max(steady_passes, 1)
                rss_now, _ = rss(proc.pid)

                churn_mark, stop = fake.log.mark(), threading.Event()

                def churn() -> None:
                    gen = 0
                    while not stop.wait(2.0):
                        gen += 1
                        new_listed, new_objects = workload(args.pods, gen)
                        _, old_objects = workload(args.pods, gen - 1)
                        gone = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in old_objects}
                        kept = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in new_objects}
                        kubelet.pods = new_listed
                        for ns, name in gone - kept:
                            fake.objects.delete("pods", name, namespace=ns)
                        for o in new_objects:
                            if (o["metadata"]["namespace"], o["metadata"]["name"]) not in gone:
                                fake.objects.create("pods", o, namespace=o["metadata"]["namespace"])

                t = threading.Thread(target=churn, daemon=True)
                t.start()
                time.sleep(args.seconds)
                stop.set()
                t.join()
                churned = counts(fake, churn_mark)
                churn_passes = kubelet.calls["List"] - steady_calls - steady_passes
                rss_churn, hwm = rss(proc.pid)
            finally:
                proc.terminate()
                proc.wait(10)
            floor = floor_rss()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    per_min = 60.0 / args.seconds
    print(
        f"node: 192 CPUs, 8 NUMA zones, {args.pods} pods ({GUARANTEED} Guaranteed); interval {args.interval:g}s"
    )
    print(f"start-up requests: {dict(first)}  (passes: {start_passes})")
    for label, c in (("steady", steady), ("churn, pods ending and starting every 2 s", churned)):
        print(f"{label}: API requests/min at {args.interval:g}s interval: "
              f"{ {f'{v} {r}': round(n * per_min, 1) for (v, r), n in sorted(c.items())} }")  # fmt: skip
        writes = sum(
            n for (v, r), n in c.items() if v in ("create", "update") and "noderesourcetopologies" in r
        )
        reads = sum(n for (v, r), n in c.items() if v == "get")
        print(f"  NRT writes/min {writes * per_min:.1f}; GETs/min {reads * per_min:.1f}; "
              f"per-pod GETs: {sum(n for (v, r), n in c.items() if v == 'get' and r == 'pods')}")  # fmt: skip
    print(f"  upstream's pattern for comparison (not measured): one pod GET per pod per pass = "
          f"{args.pods * 60 / args.interval:.0f} GETs/min at this interval")  # fmt: skip
    print(f"passes: steady {steady_passes} in {args.seconds:g}s; churn {churn_passes} in {args.seconds:g}s")
    print(f"environment from the overlay: {env}")
    print(f"RSS: updater {rss_now / 1024:.1f} MiB after steady, {rss_churn / 1024:.1f} MiB after churn "
          f"(peak {hwm / 1024:.1f} MiB = {hwm * 1024 / 1e6:.1f} MB); bare python importing grpc, ssl, yaml {floor[0] / 1024:.1f} MiB; "
          f"ratio {hwm / floor[0]:.2f}")  # fmt: skip
    print(f"CPU per pass: {cpu_pass * 1e3:.2f} ms in process (median of 200); "
          f"{steady_cpu * 1e3:.2f} ms for the whole updater process (incl. watch, gRPC, idle wakeups)")  # fmt: skip


if __name__ == "__main__":
    main()
