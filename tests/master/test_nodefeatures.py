"""The master's NodeFeature watch against the fake API server: one paginated LIST at
start, then only the watch; a broken watch resumes from its resourceVersion, an expired
one (410) lists again."""

from __future__ import annotations

import zlib
from typing import Any

from nfd.master.core.kube import KubeApi
from nfd.master.core.settings import KubeSettings
from nfd.master.publishing.patches import LABELS_ANN
from nfd.master.watches.nodefeatures import NodeFeatureIndex, NodeFeatureWatcher
from nfd.nodefeature import NodeFeatureObject, parse
from tests.fakeapi import FakeApiServer
from tests.fakeapi.resources import NODE_FEATURES

from .kubehelpers import kube_master, until, wait_for

RES = "nodefeatures.nfd.k8s-sigs.io"
FNS = "feature.node.kubernetes.io"


def nf(name: str, node: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {"name": name, "namespace": ns, "labels": {"nfd.node.kubernetes.io/node-name": node}},
        "spec": {"labels": labels},
    }


class Seen:
    def __init__(self) -> None:
        self.nodes: dict[str, list[NodeFeatureObject]] = {}

    def __call__(self, node: str, objs: list[NodeFeatureObject]) -> None:
        self.nodes[node] = objs

    def labels(self, node: str) -> dict[str, str]:
        return {k: v for o in self.nodes.get(node, []) for k, v in o.labels.items()}


def watcher(api: FakeApiServer, seen: Seen, page: int = 500) -> tuple[NodeFeatureWatcher, KubeApi]:
    kube = KubeApi(api.api_client(), KubeSettings())
    return NodeFeatureWatcher(api=kube, page_size=page, on_node=seen), kube


async def test_paged_list_then_watch_only() -> None:
    with FakeApiServer() as api:
        for i in range(7):
            api.objects.create("nodefeatures", nf(f"o{i}", f"n{i % 3}", a=str(i)), "default")
        seen = Seen()
        w, kube = watcher(api, seen, page=3)
        mark = api.log.mark()
        try:
            await w.start()
            assert w.synced and api.log.count(verb="list", resource=RES, since=mark) == 3
            assert sorted(o.name for o in seen.nodes["n0"]) == ["o0", "o3", "o6"]
            api.objects.create("nodefeatures", nf("new", "n1", b="1"), "other")
            api.objects.delete("nodefeatures", "o0", "default")
            api.objects.modify(
                "nodefeatures", "o3", lambda o: o["spec"]["labels"].update(a="changed"), "default"
            )
            await until(lambda: seen.labels("n1").get("b") == "1", "added object")
            await until(
                lambda: seen.labels("n0") == {"a": "6"} or seen.labels("n0").get("a") == "changed", "n0"
            )
            await until(lambda: [o.name for o in seen.nodes["n0"]] == ["o3", "o6"], "deleted object")
            # Moving an object to another node touches both.
            api.objects.modify(
                "nodefeatures",
                "o6",
                lambda o: o["metadata"]["labels"].update({"nfd.node.kubernetes.io/node-name": "n9"}),
                "default",
            )
            await until(lambda: [o.name for o in seen.nodes.get("n9", [])] == ["o6"], "moved object")
            assert [o.name for o in seen.nodes["n0"]] == ["o3"]
            assert api.log.count(verb="list", resource=RES, since=mark) == 3  # no LIST per change
        finally:
            w.stop()
            api.drop_connections()
            kube.close()


async def test_broken_watch_resumes_without_listing_and_410_lists_again() -> None:
    with FakeApiServer(watch_history=5) as api:
        api.objects.create("nodefeatures", nf("a", "n1", v="0"), "default")
        seen = Seen()
        w, kube = watcher(api, seen)
        try:
            await w.start()
            await until(lambda: seen.labels("n1") == {"v": "0"}, "first list")
            lists = api.log.count(verb="list", resource=RES)
            api.drop_connections()
            api.objects.modify("nodefeatures", "a", lambda o: o["spec"]["labels"].update(v="1"), "default")
            await until(lambda: seen.labels("n1") == {"v": "1"}, "change after a dropped watch")
            assert api.log.count(verb="list", resource=RES) == lists
            # Too many changes while cut off: the resourceVersion expires (410), the
            # watcher lists again and ends up current.
            api.faults.down(mode="reset")
            api.drop_connections()
            for i in range(20):
                api.objects.modify(
                    "nodefeatures", "a", lambda o, i=i: o["spec"]["labels"].update(v=f"x{i}"), "default"
                )
            api.objects.delete("nodefeatures", "a", "default")
            api.objects.create("nodefeatures", nf("b", "n2", w="1"), "default")
            api.faults.up()
            await until(
                lambda: seen.labels("n2") == {"w": "1"} and seen.nodes.get("n1") == [], "relist", timeout=40
            )
            assert api.log.count(verb="list", resource=RES) > lists
        finally:
            w.stop()
            api.drop_connections()
            kube.close()


def test_index_ignores_objects_without_a_node() -> None:
    idx = NodeFeatureIndex()
    assert idx.put(parse({"metadata": {"name": "x", "namespace": "d"}})) == set()
    assert idx.put(parse(nf("y", "n1"))) == {"n1"}
    assert idx.put(parse(nf("y", "n1"))) == set()  # unchanged
    assert idx.replace_all([]) == {"n1"} and idx.by_node == {}


async def test_no_rights_to_list_does_not_stop_the_master() -> None:
    with FakeApiServer() as api:
        api.faults.fail(403, verb="list", resource=RES, times=None)
        seen = Seen()
        w, kube = watcher(api, seen)
        try:
            await w.start()
            assert w.synced and seen.nodes == {}
        finally:
            w.stop()
            api.drop_connections()
            kube.close()


def big(name: str, node: str, kb: int = 130) -> dict[str, Any]:
    """An object of about ``kb`` kB (upstream #1802 saw ~130 kB): a kernel config every
    node shares, and the node's own name."""
    obj = nf(name, node, "node-feature-discovery", **{"from-object": "true"})
    config = {f"CONFIG_OPTION_{i:05d}": "y" for i in range(kb * 1000 // 24)}
    obj["spec"]["features"] = {
        "attributes": {"kernel.config": {"elements": config}, "system.name": {"elements": {"nodename": node}}}
    }
    return obj


def test_a_slow_sync_of_big_objects_drops_no_label(fake_api: FakeApiServer) -> None:
    """Nodes carry what an earlier master set from their objects; the first LIST fails,
    the next one is slow (two objects a page, each answered late) while the workers send
    their features: nothing is written before every object is known, and no write leaves
    an object's label out."""
    nodes = [f"n{i}" for i in range(6)]
    for n in nodes:
        fake_api.create_node(
            n, labels={f"{FNS}/from-object": "true"}, annotations={LABELS_ANN: "from-object"}
        )
        fake_api.objects.create("nodefeatures", big(n, n), "node-feature-discovery")
    assert len(fake_api.store.get(NODE_FEATURES, "node-feature-discovery", "n0").raw) > 120_000
    mark = fake_api.store.resource_version
    fake_api.faults.fail(504, times=1, verb="list", resource=RES)
    slow = fake_api.faults.delay(0.3, verb="list", resource=RES)
    with kube_master(fake_api, kube__list_page_size=2) as m:
        for n in nodes:
            assert m.put(n, {"w": "worker"}).status_code == 200
        wait_for(lambda: m.runtime.nodefeatures is not None and m.runtime.nodefeatures.synced, 30, "synced")
        wait_for(m.settled, 30, "every node written")
        assert slow.hits >= 3  # the LIST was paged, each page late
        for n in nodes:
            labels = fake_api.labels(n)
            assert labels[f"{FNS}/from-object"] == "true" and labels[f"{FNS}/fixture-w"] == "worker", n
        # Kept by digest: the six objects share every group but their node's name.
        stored = m.runtime.service.store.features
        one = fake_api.store.get(NODE_FEATURES, "node-feature-discovery", "n0").raw
        assert stored.stored_bytes() < 2 * len(zlib.compress(one))
    writes, _ = fake_api.store.events_after(mark, ["nodes"])
    assert {e.new.obj["metadata"]["name"] for e in writes} == set(nodes)
    assert all(e.new.obj["metadata"]["labels"].get(f"{FNS}/from-object") == "true" for e in writes)
