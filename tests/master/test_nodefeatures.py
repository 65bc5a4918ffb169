"""The master's NodeFeature watch against the fake API server: one paginated LIST at
start, then only the watch; a broken watch resumes from its resourceVersion, an expired
one (410) lists again."""

from __future__ import annotations

from typing import Any

from nfd.master.kube import KubeApi
from nfd.master.nodefeatures import NodeFeatureIndex, NodeFeatureWatcher
from nfd.master.settings import KubeSettings
from nfd.nodefeature import NodeFeatureObject, parse
from tests.fakeapi import FakeApiServer

from .kubehelpers import until

RES = "nodefeatures.nfd.k8s-sigs.io"


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
