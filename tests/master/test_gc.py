"""Garbage collection by the leader, on a schedule: NodeFeature objects of nodes that no
longer exist are deleted and the master forgets those nodes; live nodes keep theirs."""

from __future__ import annotations

from typing import Any

from tests.master.kubehelpers import kube_master, wait_for

RES = "nodefeatures.nfd.k8s-sigs.io"


def nf(name: str, node: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {"name": name, "namespace": ns, "labels": {"nfd.node.kubernetes.io/node-name": node}},
        "spec": {"labels": {"from-object": "yes"}},
    }


def test_gc_deletes_objects_of_gone_nodes_on_its_schedule(fake_api):
    fake_api.create_node("live")
    fake_api.create_node("doomed")
    fake_api.objects.create("nodefeatures", nf("live", "live", "nfd"), "nfd")
    fake_api.objects.create("nodefeatures", nf("gfd-doomed", "doomed", "gpu"), "gpu")
    fake_api.objects.create("nodefeatures", nf("never", "never-existed", "gpu"), "gpu")
    with kube_master(fake_api, nodefeatures__gc_interval_s=0.3) as m:
        m.put("doomed", {"a": "1"})
        wait_for(lambda: m.view("live")["labels"].get("feature.node.kubernetes.io/from-object") == "yes")
        wait_for(lambda: not fake_api.objects.exists("nodefeatures", "never", "gpu"), what="orphan deleted")
        assert fake_api.objects.exists("nodefeatures", "gfd-doomed", "gpu")
        fake_api.delete_node("doomed")
        wait_for(
            lambda: not fake_api.objects.exists("nodefeatures", "gfd-doomed", "gpu"),
            what="gone node's object",
        )
        wait_for(lambda: m.runtime.service.store.get("doomed") is None, what="gone node forgotten")
        assert fake_api.objects.exists("nodefeatures", "live", "nfd")
        assert m.runtime.gc is not None and m.runtime.gc.last is not None
        deletes = fake_api.log.records(verb="delete", resource=RES)
        assert sorted(r.name for r in deletes) == ["gfd-doomed", "never"]


async def test_only_the_leader_collects(fake_api):
    from nfd.master.core.kube import KubeApi
    from nfd.master.core.settings import KubeSettings
    from nfd.master.watches.gc import GarbageCollector
    from nfd.master.watches.nodefeatures import NodeFeatureIndex
    from nfd.nodefeature import parse

    fake_api.objects.create("nodefeatures", nf("orphan", "gone", "gpu"), "gpu")
    idx = NodeFeatureIndex()
    idx.put(parse(fake_api.objects.get("nodefeatures", "orphan", "gpu")))
    kube = KubeApi(fake_api.api_client(), KubeSettings())
    leader = False

    class NoService:
        store: tuple[Any, ...] = ()

    try:
        gc = GarbageCollector(
            api=kube,
            service=NoService(),
            index=idx,
            interval_s=3600,
            page_size=10,
            is_leader=lambda: leader,  # type: ignore[arg-type]
        )
        r = await gc.collect()
        assert r.skipped == "not the leader" and fake_api.objects.exists("nodefeatures", "orphan", "gpu")
        assert fake_api.log.count(verb="list", resource="nodes") == 0
        leader = True
        r = await gc.collect()
        assert (r.deleted, r.failed) == (1, 0)
        assert not fake_api.objects.exists("nodefeatures", "orphan", "gpu")
    finally:
        kube.close()


async def test_gc_counts_deletions_and_failures_by_kind(fake_api):
    """Upstream nfd-gc's two series, served with the master's metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    from nfd.master.core.kube import KubeApi
    from nfd.master.core.metrics import Metrics
    from nfd.master.core.settings import KubeSettings
    from nfd.master.watches.gc import GarbageCollector
    from nfd.master.watches.nodefeatures import NodeFeatureIndex
    from nfd.nodefeature import parse

    idx = NodeFeatureIndex()
    for name in ("gone-a", "gone-b", "stuck"):
        fake_api.objects.create("nodefeatures", nf(name, name, "gpu"), "gpu")
        idx.put(parse(fake_api.objects.get("nodefeatures", name, "gpu")))
    fake_api.faults.fail(500, verb="delete", resource=RES, path="/stuck$")
    kube = KubeApi(fake_api.api_client(), KubeSettings())
    metrics = Metrics()

    class NoService:
        store: tuple[Any, ...] = ()

    def samples() -> dict[str, float]:
        return {
            f"{s.name}{{{s.labels.get('kind', '')}}}": s.value
            for fam in text_string_to_metric_families(metrics.render().decode())
            if fam.name.startswith("nfd_gc_")
            for s in fam.samples
            if s.name.endswith("_total")
        }

    try:
        gc = GarbageCollector(
            api=kube,
            service=NoService(),  # type: ignore[arg-type]
            index=idx,
            interval_s=3600,
            page_size=10,
            is_leader=lambda: True,
            metrics=metrics,
        )
        r = await gc.collect()
        assert (r.deleted, r.failed) == (2, 1)
        assert samples() == {
            "nfd_gc_objects_deleted_total{NodeFeature}": 2.0,
            "nfd_gc_object_delete_failures_total{NodeFeature}": 1.0,
        }
    finally:
        kube.close()
