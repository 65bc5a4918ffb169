"""A rolling update of the master Deployment with real `nfd master` processes against the
fake API server, 1,000 nodes posting throughout: the old leader and the follower are
replaced one by one by new pods (maxSurge 1, maxUnavailable 0), each old pod drained
with SIGTERM. Nothing is lost, no label flaps, no worker has to resend.

Each pod has its own pod-IP-like address, which the certificate the masters make and
share does not name: followers verify the leader by the Service's name, as in a cluster."""

from __future__ import annotations

import asyncio
import random
import ssl
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from nfd.features import Features
from tests.master.replicas import BY_SERVICE, Pod

FNS = "feature.node.kubernetes.io"
NODES = 1000
RULE = textwrap.dedent("""
    apiVersion: nfd.k8s-sigs.io/v1alpha1
    kind: NodeFeatureRule
    metadata: {name: ids}
    spec:
      rules:
        - name: id
          labels: {"rollout-id": "@attr.rollout.id"}
          matchFeatures:
            - feature: attr.rollout
              matchExpressions: {id: {op: Exists}}
""")


class ClusterCA:
    """The CA the masters publish in their ConfigMap (as workers mount it), once there."""

    def __init__(self, fake_api: Any, path: Path) -> None:
        self.fake_api, self.path = fake_api, path

    def file(self) -> str | None:
        if not self.path.exists():
            if not self.fake_api.objects.exists("configmaps", "nfd-master-ca", "node-feature-discovery"):
                return None
            cm = self.fake_api.objects.get("configmaps", "nfd-master-ca", "node-feature-discovery")
            self.path.write_text(cm["data"]["ca.crt"])
        return str(self.path)


class Fleet:
    """1,000 workers behind a Service: each node keeps a connection to one replica,
    heartbeats every round, re-sends its features on 409, and moves to another Ready
    replica when its own goes away (as the Service's endpoints change)."""

    def __init__(self) -> None:
        self.pods: list[Pod] = []
        self.of: dict[str, Pod] = {}
        self.body: dict[str, dict[str, Any]] = {}
        self.digest: dict[str, str] = {}
        self.puts = self.resends = self.errors = 0
        self.outcomes: dict[str, int] = {}
        for i in range(NODES):
            n = f"n{i:04d}"
            f = Features()
            f.set_attributes("attr.rollout", {"id": n})
            self.body[n] = {"nfdVersion": "rollout", "digest": f.digest(), "features": f.to_dict()}

    def serve(self, pods: list[Pod]) -> None:
        self.pods = list(pods)
        for n, p in list(self.of.items()):
            if p not in self.pods:
                self.of[n] = random.choice(self.pods)

    async def _one(self, client: httpx.AsyncClient, n: str) -> None:
        for _ in range(5):
            pod = self.of.setdefault(n, random.choice(self.pods))
            try:
                if n in self.digest:
                    r = await client.post(
                        f"{pod.url}/api/v1/nodes/{n}/heartbeat",
                        json={"digest": self.digest[n]},
                        extensions=BY_SERVICE,
                    )
                    if r.status_code == 200:
                        return
                    if r.status_code != 409:
                        raise httpx.HTTPError(f"heartbeat {r.status_code}")
                    self.resends += 1
                r = await client.put(
                    f"{pod.url}/api/v1/nodes/{n}/features", json=self.body[n], extensions=BY_SERVICE
                )
                if r.status_code != 200:
                    raise httpx.HTTPError(f"features {r.status_code}")
                self.puts += 1
                o = r.headers.get("x-nfd-outcome", "")
                self.outcomes[o] = self.outcomes.get(o, 0) + 1
                self.digest[n] = r.json()["digest"]
                return
            except httpx.HTTPError:
                self.errors += 1
                self.of[n] = random.choice(self.pods)  # the Service sends it elsewhere
                await asyncio.sleep(0.05)
        raise AssertionError(f"{n}: no replica took it")

    async def round(self, ca: str) -> None:
        sem = asyncio.Semaphore(16)
        async with httpx.AsyncClient(timeout=10, verify=ssl.create_default_context(cafile=ca)) as client:

            async def one(n: str) -> None:
                async with sem:
                    await self._one(client, n)

            await asyncio.gather(*(one(n) for n in self.body))


class LabelWatch(threading.Thread):
    """Counts label removals on the Nodes as a watcher of the API server sees them."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(daemon=True)
        self.api_client = api_client
        self.labels: dict[str, set[str]] = {}
        self.removed: list[tuple[str, str]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from kubernetes import client, watch

        v1 = client.CoreV1Api(self.api_client)
        w = watch.Watch()
        for ev in w.stream(v1.list_node, timeout_seconds=600, deserialize=False):
            if self.stop.is_set():
                return
            obj = ev["object"]
            name = obj["metadata"]["name"]
            now = {k for k in (obj["metadata"].get("labels") or {}) if k.startswith(FNS)}
            before = self.labels.get(name, set())
            if ev["type"] != "DELETED":
                self.removed += [(name, k) for k in before - now]
                self.labels[name] = now


def _leader(pods: list[Pod]) -> Pod | None:
    for p in pods:
        r = p.readyz()
        if r is not None and r["detail"] == "leader":
            return p
    return None


def test_rolling_update_and_drain_lose_nothing_and_flap_nothing(fake_api, tmp_path):
    for i in range(NODES):
        fake_api.create_node(f"n{i:04d}")
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "ids.yaml").write_text(RULE)
    ca = ClusterCA(fake_api, tmp_path / "ca.crt")
    watcher = LabelWatch(fake_api.api_client())
    watcher.start()
    pods: list[Pod] = []

    def pod(name: str) -> Pod:
        ip = f"127.0.0.{len(pods) + 2}"  # as pod IPs: a new one for each pod
        p = Pod(name, ip, kubeconfig, tmp_path, ca.file, "--rules-dir", str(rules))
        pods.append(p)
        return p

    try:
        old_a, old_b = pod("nfd-master-old-a"), pod("nfd-master-old-b")
        for p in (old_a, old_b):
            p.wait_ready()
        fleet = Fleet()
        fleet.serve([old_a, old_b])
        asyncio.run(fleet.round(str(ca.file())))  # every node sends its features once
        fake_api.wait_for(
            lambda: (
                sum(1 for n in fake_api.nodes() if f"{FNS}/rollout-id" in n["metadata"]["labels"]) == NODES
            ),
            # A bound, not a timing: late in a full run the fake API server shares this
            # process with everything earlier tests left behind, and answers slowly.
            timeout=600,
            what="every node labelled",
        )
        first_puts = fleet.puts
        assert first_puts == NODES

        takeovers = []
        serving = [old_a, old_b]
        for new_name in ("nfd-master-new-a", "nfd-master-new-b"):
            new = pod(new_name)  # maxSurge 1: the new pod first ...
            new.wait_ready()
            serving.append(new)
            fleet.serve(serving)
            asyncio.run(fleet.round(str(ca.file())))
            old = _leader(serving[:-1]) or serving[0]
            if old not in (old_a, old_b):
                old = old_a if old_a in serving else old_b
            serving.remove(old)  # ... then an old one, leader first, drained
            fleet.serve(serving)
            was_leader = _leader([old]) is not None
            t0 = time.monotonic()
            assert old.drain() == 0, old.log.read_text()[-2000:]
            if was_leader:
                while _leader(serving) is None:
                    assert time.monotonic() - t0 < 30, "no replica took over"
                    time.sleep(0.02)
                takeovers.append(time.monotonic() - t0)
            asyncio.run(fleet.round(str(ca.file())))

        asyncio.run(fleet.round(str(ca.file())))
        leader = _leader(serving)
        assert leader is not None and leader.name.startswith("nfd-master-new")
        view, cont = [], None
        while cont != "":  # every page, as a Kubernetes client would
            page = leader.request(
                "GET",
                "/api/v1/nodes",
                params={"limit": 500, **({"continue": cont} if cont else {})},
                timeout=120,
            ).json()
            view += page["items"]
            cont = page["metadata"]["continue"]
        # Nothing lost: the new leader holds every node's features, every Node its label.
        assert {v["node"]: v["digest"] for v in view} == fleet.digest
        assert all(v["inSync"] for v in view)
        for n in fake_api.nodes():
            name = n["metadata"]["name"]
            assert n["metadata"]["labels"][f"{FNS}/rollout-id"] == name
        # Nothing flapped and nothing was written twice: one PATCH per node, ever.
        assert watcher.removed == []
        assert fake_api.log.count(verb="patch", resource="nodes") == NODES
        # No worker had to resend: every replica held every node's features.
        assert fleet.resends == 0 and fleet.puts == first_puts
        print(f"\ntakeover after draining the leader: {', '.join(f'{t:.2f}s' for t in takeovers)}; "
              f"PUT outcomes {fleet.outcomes}; requests retried on another replica: {fleet.errors}")  # fmt: skip
        assert takeovers  # the leader was drained at least once
    finally:
        watcher.stop.set()
        for p in pods:
            p.kill()
