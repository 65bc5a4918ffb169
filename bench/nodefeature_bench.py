"""NodeFeature objects through the master, and NodeFeatureGroups at scale; prints figures.

1. N nodes (10,000 by default) from nothing to labelled against the fake API server,
   each node with a worker post (the upstream baseline node's 50 kB features) and a
   GPU-feature-discovery-style NodeFeature object (tests/fixtures/nodefeature), timed
   against the same run with worker posts only (the baseline); then a steady round
   (every node re-sends unchanged features, the objects unchanged): API writes.
2. A NodeFeatureGroup over 20,000 nodes with 253-character names: the first evaluation,
   the status size (etcd's limit is 1.5 MiB), the time to bring the status up to date
   after one node changes, and that status written to the fake API server.

Usage: python bench/nodefeature_bench.py [--nodes 10000] [--group-nodes 20000] [--skip-labelling]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from master_bench import (  # noqa: E402
    RULES,
    cpu_s,
    env,
    features_template,
    free_port,
    metric,
    pin_self,
    put_all,
    start_master,
    stop,
)

GFD = REPO / "tests" / "fixtures" / "nodefeature" / "gfd-h100-node.yaml"


def serve_fake(nodes: int, with_objects: bool) -> None:
    """Child process: the fake with ``nodes`` Nodes (and a GFD object per node); answers
    'counts' and 'labelled' on stdin."""
    from tests.fakeapi import FakeApiServer

    gfd = yaml.safe_load(GFD.read_text())
    with FakeApiServer() as fake:
        for i in range(nodes):
            name = f"node-{i:05d}"
            fake.create_node(name)
            if with_objects:
                obj = copy.deepcopy(gfd)
                obj["metadata"]["name"] = f"nvidia-features-for-{name}"
                obj["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] = name
                fake.objects.create("nodefeatures", obj, "gpu-operator")
        print(fake.url, flush=True)
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "counts":
                print(json.dumps({f"{v} {r}": n for (v, r), n in fake.log.counts().items()}), flush=True)
            elif cmd == "labelled":
                # Labelled: the worker's labels and, with objects, the GPU labels too.
                done = sum(
                    1
                    for n in fake.nodes()
                    if "feature.node.kubernetes.io/kernel-version.major" in n["metadata"].get("labels", {})
                    and (not with_objects or "nvidia.com/gpu.product" in n["metadata"].get("labels", {}))
                )
                print(json.dumps(done), flush=True)
            elif cmd == "quit":
                return


def labelling(n: int, with_objects: bool, tmp: Path) -> dict[str, Any]:
    pin_self(1)
    fake = subprocess.Popen(
        [sys.executable, __file__, "--serve-fake", str(n), *(["--objects"] if with_objects else [])],
        env=env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert fake.stdout and fake.stdin
    url = fake.stdout.readline().strip()

    def ask(cmd: str) -> Any:
        assert fake.stdout and fake.stdin
        fake.stdin.write(cmd + "\n")
        fake.stdin.flush()
        return json.loads(fake.stdout.readline())

    kubeconfig = tmp / f"kubeconfig-{n}-{with_objects}"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "fake", "user": {"token": "bench"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
    }))  # fmt: skip
    port = free_port()
    master = start_master(port, "--kubeconfig", str(kubeconfig), "--no-tls", "--no-rule-watch", "--rules-dir", str(RULES),
                          "--kube-api-qps", "5000", "--kube-api-burst", "5000", cpu=0, timeout=180)  # fmt: skip
    out: dict[str, Any] = {}
    try:
        template = features_template()
        names = [f"node-{i:05d}" for i in range(n)]
        c0, t0 = cpu_s(master.pid), time.monotonic()
        asyncio.run(put_all(port, names, template))
        out["put_s"] = time.monotonic() - t0
        deadline = time.monotonic() + 600
        while ask("labelled") < n and time.monotonic() < deadline:
            time.sleep(0.2)
        out["wall_s"] = time.monotonic() - t0
        out["cpu_s"] = cpu_s(master.pid) - c0
        out["labelled"] = ask("labelled")
        before = ask("counts")
        out["requests"] = before
        asyncio.run(put_all(port, names, template))  # steady: nothing changed
        time.sleep(1.0)
        after = ask("counts")
        diff = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}
        out["steady_writes"] = sum(
            v for k, v in diff.items() if k.split()[0] in ("patch", "update", "create", "delete")
        )
        out["steady_requests"] = diff
        out["updates"] = metric(port, "nfd_master_node_updates_total")
    finally:
        stop(master)
        try:
            fake.stdin.write("quit\n")
            fake.stdin.flush()
        except BrokenPipeError:
            pass
        fake.wait(60)
    return out


def bench_labelling(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = labelling(n, False, Path(tmp))
        both = labelling(n, True, Path(tmp))
    for what, r in (("worker posts only (baseline)", base), ("worker posts + GFD NodeFeature", both)):
        lists = {k: v for k, v in r["requests"].items() if k.startswith("list ")}
        print(f"{n} nodes, {what}: labelled in {r['wall_s']:.1f} s wall ({r['cpu_s']:.1f} s master CPU, "
              f"PUTs answered after {r['put_s']:.1f} s), {r['labelled']} labelled; LISTs {lists}; "
              f"steady round: {r['steady_writes']} writes {r['steady_requests']}")  # fmt: skip
    print(f"ratio with objects / baseline: wall {both['wall_s'] / base['wall_s']:.2f}, "
          f"master CPU {both['cpu_s'] / base['cpu_s']:.2f} (load average {os.getloadavg()[0]:.1f})")  # fmt: skip


def bench_group(n: int) -> None:
    from nfd.config import WorkerConfig
    from nfd.features import Features
    from nfd.master.core.metrics import Metrics
    from nfd.master.decisions.decide import Decider
    from nfd.master.decisions.service import MasterService
    from nfd.master.watches.groups import GroupManager, parse_group, status_of
    from nfd.policy import Policy
    from tests.fakeapi import FakeApiServer

    async def run() -> None:
        svc = MasterService(
            decider=Decider(sources=[], config=WorkerConfig(), policy=Policy()), metrics=Metrics()
        )
        names = [f"n{i:05d}-" + "x" * (253 - 7) for i in range(n)]
        kinds = []
        for k in range(8):  # eight hardware kinds, as a fleet has a few
            f = Features()
            f.set_attributes("kernel.version", {"major": "6", "minor": str(k)})
            f.set_flags("cpu.cpuid", ["AVX", "AVX2"] + (["AVX512F"] if k % 2 else []))
            kinds.append(f.to_dict())
        for i, name in enumerate(names):
            svc.submit(name, features=kinds[i % 8])
        group = {
            "metadata": {"name": "avx512", "namespace": "default"},
            "spec": {"featureGroupRules": [{"name": "avx512", "matchFeatures": [
                {"feature": "cpu.cpuid", "matchExpressions": {"AVX512F": {"op": "Exists"}}}]}]},
        }  # fmt: skip
        gm = GroupManager(service=svc, api=None)
        t0 = time.perf_counter()
        gm.set_group(group)
        first = time.perf_counter() - t0
        g = gm.groups[("default", "avx512")]
        t0 = time.perf_counter()
        st = status_of(g.members)
        status_s = time.perf_counter() - t0
        size = len(json.dumps({"status": st}, separators=(",", ":")))
        flat = len(
            json.dumps({"status": {"nodes": [{"name": m} for m in sorted(g.members)]}}, separators=(",", ":"))
        )
        # One node changes kind (joins the group): membership, then the new status.
        t0 = time.perf_counter()
        svc.submit(names[0], features=kinds[1])
        changed = names[0] in g.members
        st2 = status_of(g.members)
        one_s = time.perf_counter() - t0
        # And that status written through the real client to the fake API server.
        with FakeApiServer() as fake:
            from nfd.master.core.kube import KubeApi
            from nfd.master.core.settings import KubeSettings

            fake.objects.create("nodefeaturegroups", {"apiVersion": "nfd.k8s-sigs.io/v1alpha1",
                                "kind": "NodeFeatureGroup", **group}, "default")  # fmt: skip
            kube = KubeApi(fake.api_client(), KubeSettings())
            try:
                t0 = time.perf_counter()
                await kube.patch_custom_status("nfd.k8s-sigs.io", "v1alpha1", "default", "nodefeaturegroups",
                                               "avx512", [{"op": "add", "path": "/status", "value": st2}])  # fmt: skip
                write_s = time.perf_counter() - t0
            finally:
                kube.close()
        print(f"NodeFeatureGroup over {n} nodes (253-character names, 8 hardware kinds): first evaluation "
              f"{first * 1000:.0f} ms; {st['nodeCount']} members; status {size / 1024:.0f} KiB "
              f"({len(st['nodes'])} names listed, truncated={st['nodesTruncated']}) where upstream's flat list "
              f"would be {flat / 1024:.0f} KiB (etcd limit 1536 KiB); building the status {status_s * 1000:.0f} ms")  # fmt: skip
        print(f"one node changes: membership updated={changed}, status rebuilt in {one_s * 1000:.1f} ms; "
              f"written to the fake API server in {write_s * 1000:.0f} ms")  # fmt: skip
        _ = parse_group  # the parser is exercised by set_group

    asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--group-nodes", type=int, default=20_000)
    ap.add_argument("--skip-labelling", action="store_true")
    ap.add_argument("--serve-fake", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--objects", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_fake is not None:
        serve_fake(a.serve_fake, a.objects)
        return
    bench_group(a.group_nodes)
    if not a.skip_labelling:
        bench_labelling(a.nodes)


if __name__ == "__main__":
    main()
