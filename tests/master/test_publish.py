"""Publishing to the fake API server with the real kubernetes client."""

from __future__ import annotations

from nfd.master.publishing.patches import ER_ANN, LABELS_ANN

from .kubehelpers import kube_master, wait_for

FNS = "feature.node.kubernetes.io"


def test_labels_reach_the_node_and_foreign_labels_stay(fake_api):
    fake_api.create_node("n1", labels={"team.example.com/owner": "ops", f"{FNS}/by-hand": "1"})
    with kube_master(fake_api) as m:
        assert m.put("n1", {"a": "1", "b": "2"}).status_code == 200
        wait_for(m.settled, what="publish")
        labels = fake_api.labels("n1")
        assert labels[f"{FNS}/fixture-a"] == "1" and labels[f"{FNS}/fixture-b"] == "2"
        assert labels["team.example.com/owner"] == "ops" and labels["kubernetes.io/hostname"] == "n1"
        assert fake_api.annotations("n1")[LABELS_ANN] == "fixture-a,fixture-b"
        # Ownership from the Nodes as one LIST at the start showed them, then one PATCH.
        assert fake_api.log.count(verb="list", resource="nodes") == 1
        assert fake_api.log.count(verb="get", resource="nodes") == 0
        assert fake_api.log.count(verb="patch", resource="nodes") == 1

        m.put("n1", {"a": "1"})  # b goes away: ours, removed
        wait_for(m.settled, what="publish")
        labels = fake_api.labels("n1")
        assert f"{FNS}/fixture-b" not in labels
        assert labels[f"{FNS}/by-hand"] == "1" and labels["team.example.com/owner"] == "ops"
        assert fake_api.log.count(verb="get", resource="nodes") == 0  # no re-read needed
        assert fake_api.log.count(verb="list", resource="nodes") == 1


def test_no_write_when_nothing_changed(fake_api):
    fake_api.create_node("n1")
    with kube_master(fake_api) as m:
        first = m.put("n1", {"a": "1"}).json()
        wait_for(m.settled, what="publish")
        mark = fake_api.log.mark()
        for _ in range(20):
            assert m.put("n1", {"a": "1"}, digest=first["digest"]).status_code == 200
            assert m.put("n1", {"a": "1"}).status_code == 200  # without the digest too
            m.client.post("/api/v1/nodes/n1/heartbeat", json={"digest": first["digest"]})
        wait_for(m.settled, what="settle")
        assert fake_api.log.counts(since=mark) == {}


def test_extended_resources_in_capacity_and_allocatable_and_device_plugin_ones_never(fake_api, tmp_path):
    (tmp_path / "r.yaml").write_text(RES_RULE)
    fake_api.create_node("n1", capacity={"nvidia.com/gpu": "8"})
    with kube_master(fake_api, rules__rules_dir=tmp_path) as m:
        body = m.put("n1", {"a": "1"}, devicePluginResources=["nvidia.com/gpu"]).json()
        assert body["extendedResources"] == {f"{FNS}/widgets": "4"}
        wait_for(m.settled, what="publish")
        node = fake_api.node("n1")
        assert node["status"]["capacity"][f"{FNS}/widgets"] == "4"
        assert node["status"]["allocatable"][f"{FNS}/widgets"] == "4"
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"  # the device plugin's, untouched
        assert node["metadata"]["annotations"][ER_ANN] == "widgets"
        status_patches = fake_api.log.records(verb="patch", resource="nodes/status")
        assert len(status_patches) == 1
        # A merge patch (RFC 7386), not a strategic one: the master says each member it sets or removes.
        assert status_patches[0].content_type.startswith("application/merge-patch+json")


RES_RULE = """
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: res}
spec:
  rules:
    - name: widgets
      extendedResources: {widgets: "4", "nvidia.com/gpu": "2"}
      matchFeatures:
        - feature: fixture.labels
          matchExpressions: {a: {op: Exists}}
"""


def test_resources_reasserted_after_node_recreation(fake_api, tmp_path):
    (tmp_path / "r.yaml").write_text(RES_RULE)
    fake_api.create_node("n1")
    with kube_master(fake_api, rules__rules_dir=tmp_path, kube__resync_period_s=0.2) as m:
        m.put("n1", {"a": "1"})
        wait_for(lambda: fake_api.capacity("n1").get(f"{FNS}/widgets") == "4", what="resource")
        fake_api.recreate_node("n1")
        assert f"{FNS}/widgets" not in fake_api.capacity("n1")
        wait_for(lambda: fake_api.capacity("n1").get(f"{FNS}/widgets") == "4", what="re-assert")
        node = fake_api.node("n1")
        assert node["status"]["allocatable"][f"{FNS}/widgets"] == "4"
        assert node["metadata"]["labels"][f"{FNS}/fixture-a"] == "1"
        # The resync lists nodes (paginated), it never GETs them one by one.
        assert fake_api.log.count(verb="get", resource="nodes") == 0


def test_a_leader_lists_the_nodes_once_at_start_a_page_at_a_time(fake_api, tmp_path):
    # 12 Nodes, 5 a page: one LIST is three requests (the API counter then says 3.0).
    for i in range(12):
        fake_api.create_node(f"n{i:02d}")
    (tmp_path / "rules").mkdir()
    settings = {"kube__list_page_size": 5, "rules__rules_dir": tmp_path / "rules"}
    with kube_master(fake_api, leader__enabled=True, leader__identity="m", **settings) as m:
        wait_for(
            lambda: m.runtime.elector.leader and m.runtime.publisher.primed.is_set(), what="leads, listed"
        )
        wait_for(lambda: fake_api.log.count(verb="watch", resource="nodes") == 1, what="watches the Nodes")
        pages = fake_api.log.records(verb="list", resource="nodes")
        assert [("continue=" in r.query) for r in pages] == [False, True, True]
        counted = m.runtime.metrics.registry.get_sample_value(
            "nfd_master_api_requests_total", {"verb": "list", "resource": "nodes", "code": "200"}
        )
        assert counted == len(pages)
