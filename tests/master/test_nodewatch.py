"""The Node watch: a Node re-created, or stripped of what the master applies, is written
again within seconds (not at the hourly resync), and ``inSync`` tells the truth meanwhile."""

from __future__ import annotations

import time

from .kubehelpers import kube_master, wait_for
from .test_publish import RES_RULE

FNS = "feature.node.kubernetes.io"


def test_recreated_node_is_labelled_again_within_5s(fake_api):
    fake_api.create_node("n1")
    with kube_master(fake_api) as m:  # resync period: the default hour
        assert m.runtime.settings.kube.resync_period_s == 3600
        m.put("n1", {"a": "1"})
        wait_for(m.settled, what="publish")
        old_uid = fake_api.node("n1")["metadata"]["uid"]
        fake_api.delete_node("n1")
        wait_for(lambda: m.view("n1")["inSync"] is False, what="inSync false once deleted")
        t0 = time.monotonic()
        new = fake_api.create_node("n1")
        assert new["metadata"]["uid"] != old_uid
        wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-a") == "1", timeout=5, what="labels back")
        took = time.monotonic() - t0
        wait_for(lambda: m.view("n1")["inSync"] is True, timeout=5, what="inSync again")
        assert took < 5
        # A heartbeat is still answered as known: the master holds the features and wrote them.
        hb = m.client.post("/api/v1/nodes/n1/heartbeat", json={"digest": m.view("n1")["digest"]})
        assert hb.status_code == 200


def test_recreated_in_place_gets_labels_and_resources_back(fake_api, tmp_path):
    (tmp_path / "r.yaml").write_text(RES_RULE)
    fake_api.create_node("n1")
    with kube_master(fake_api, rules__rules_dir=tmp_path) as m:
        m.put("n1", {"a": "1"})
        wait_for(m.settled, what="publish")
        assert fake_api.capacity("n1")[f"{FNS}/widgets"] == "4"
        fake_api.recreate_node("n1")  # kubelet registers anew: its own labels, base capacity
        wait_for(lambda: fake_api.capacity("n1").get(f"{FNS}/widgets") == "4", timeout=5, what="resource")
        assert fake_api.labels("n1")[f"{FNS}/fixture-a"] == "1"
        wait_for(lambda: m.view("n1")["inSync"] is True, timeout=5, what="inSync")


def test_labels_removed_by_someone_else_are_restored(fake_api):
    fake_api.create_node("n1")
    with kube_master(fake_api) as m:
        m.put("n1", {"a": "1", "b": "2"})
        wait_for(m.settled, what="publish")
        writes = fake_api.log.count(verb="patch", resource="nodes")

        def drop(obj):
            obj["metadata"]["labels"].pop(f"{FNS}/fixture-b")

        fake_api.objects.modify("nodes", "n1", drop)  # kubectl label node n1 ...-
        wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-b") == "2", timeout=5, what="restored")
        assert fake_api.log.count(verb="patch", resource="nodes") == writes + 1
        # Changes that leave what the master applies alone cost no write.
        after = fake_api.objects.modify("nodes", "n1", lambda o: o["metadata"]["labels"].update(other="x"))
        rv = after["metadata"]["resourceVersion"]
        rec = m.runtime.service.store.get("n1")
        wait_for(lambda: rec.observed is not None and str(rec.observed.resource_version) == rv, what="seen")
        assert m.runtime.publisher.idle()
        assert fake_api.log.count(verb="patch", resource="nodes") == writes + 1
        assert m.view("n1")["inSync"] is True
