"""Leader election with every replica serving: a follower is Ready, takes workers'
requests, keeps a copy and forwards them to the leader; a leader change loses nothing
and writes nothing again."""

from __future__ import annotations

import logging
from contextlib import ExitStack

from nfd.worker.client import MasterClient

from .helpers import features_with
from .kubehelpers import kube_master, wait_for

FNS = "feature.node.kubernetes.io"
LEASE = "nfd-master.nfd.kubernetes.io"
NS = "node-feature-discovery"


def _leader_and_follower(m1, m2):
    wait_for(
        lambda: (
            m1.runtime.elector.leader != m2.runtime.elector.leader
            and (m1.runtime.elector.holder_url or m2.runtime.elector.holder_url)
        ),
        what="one leader",
    )
    leader, follower = (m1, m2) if m1.runtime.elector.leader else (m2, m1)
    wait_for(lambda: follower.runtime.leader_url() == str(leader.client.base_url), what="leader's URL")
    return leader, follower


def test_every_replica_ready_follower_forwards_to_the_leader(fake_api):
    fake_api.create_node("n1")
    with (
        kube_master(fake_api, leader__enabled=True, leader__identity="m1") as m1,
        kube_master(fake_api, leader__enabled=True, leader__identity="m2") as m2,
    ):
        leader, follower = _leader_and_follower(m1, m2)
        assert fake_api.lease(LEASE, NS)["spec"]["holderIdentity"] == leader.runtime.settings.leader.identity
        for m in (leader, follower):  # the follower once it holds the leader's nodes
            wait_for(lambda m=m: m.client.get("/readyz").status_code == 200, what=f"{m} Ready")
        assert follower.client.get("/readyz").json()["detail"].startswith("follower; the leader is m")

        r = follower.put("n1", {"f": "1"})
        assert r.status_code == 200 and r.headers["x-nfd-outcome"] == "forwarded"
        assert r.json()["labels"] == {f"{FNS}/fixture-f": "1"}
        wait_for(leader.settled, what="leader publish")
        assert fake_api.labels("n1")[f"{FNS}/fixture-f"] == "1"
        # The follower holds a copy (a takeover needs no resend) and wrote nothing.
        assert follower.view("n1")["digest"] == leader.view("n1")["digest"]
        assert follower.runtime.publisher.idle()
        assert len(fake_api.log.records(verb="patch", resource="nodes")) == 1

        # What the follower refuses itself never reaches the leader, and claims no outcome.
        mark = fake_api.log.mark()
        bad = follower.client.put("/api/v1/nodes/n1/features", content=b"{")
        assert bad.status_code == 422 and "x-nfd-outcome" not in bad.headers
        assert leader.view("n1")["digest"] == r.json()["digest"]
        assert fake_api.log.writes(since=mark, resource="nodes") == []
        # Nor does a group named by a hash the follower does not hold: the worker sends
        # it whole, for the follower and the leader alike.
        ref = {"features": {"attributes": {"big": {"elements": None, "ref": "0" * 32}}}}
        lacking = follower.client.put("/api/v1/nodes/n1/features", json=ref)
        assert lacking.status_code == 409 and lacking.json()["missing"] == ["attributes/big"]
        assert "x-nfd-outcome" not in lacking.headers
        assert leader.view("n1")["digest"] == follower.view("n1")["digest"] == r.json()["digest"]

        digest = r.json()["digest"]
        hb = follower.client.post("/api/v1/nodes/n1/heartbeat", json={"digest": digest})
        assert hb.status_code == 200 and hb.headers["x-nfd-outcome"] == "forwarded"
        r = leader.put("n1", {"f": "1"})
        assert r.headers["x-nfd-outcome"] == "queued"


def test_follower_without_a_reachable_leader_holds_says_so_and_writes_on_takeover(fake_api):
    fake_api.create_node("n1")
    with ExitStack() as stack:
        a_stack = ExitStack()
        stack.push(a_stack)
        a = a_stack.enter_context(kube_master(fake_api, leader__enabled=True, leader__identity="a"))
        wait_for(lambda: a.runtime.elector.leader, what="a leads")
        a.runtime.elector.advertise_url = "http://127.0.0.1:9"  # nothing listens there
        b = stack.enter_context(kube_master(fake_api, leader__enabled=True, leader__identity="b"))
        wait_for(lambda: b.runtime.leader_url() == "http://127.0.0.1:9", what="b sees a's URL")
        r = b.put("n1", {"x": "1"})
        assert r.status_code == 200 and r.headers["x-nfd-outcome"] == "held"
        assert f"{FNS}/fixture-x" not in fake_api.labels("n1")
        # What the worker makes of it: no claim that anything was applied.
        client = MasterClient(str(b.client.base_url))
        try:
            reply = client.put_features("n1", {"features": features_with({"x": "1"})})
        finally:
            client.close()
        assert reply.ok and reply.outcome == "held"
        text = reply.outcome_text(len(reply.body["labels"]))
        assert "could not reach the leader" in text and "nothing is applied" in text
        # When a goes, b leads and writes what it held: nothing was lost.
        a_stack.close()
        wait_for(lambda: b.runtime.elector.leader, what="b leads")
        wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-x") == "1", what="b writes what it held")


def test_follower_takes_over_without_resend_or_rewrite(fake_api, caplog):
    fake_api.create_node("n1")
    fake_api.create_node("n2")
    with ExitStack() as stack:
        a_stack = ExitStack()
        stack.push(a_stack)
        a = a_stack.enter_context(kube_master(fake_api, leader__enabled=True, leader__identity="a"))
        wait_for(lambda: a.runtime.elector.leader, what="a leads")
        b = stack.enter_context(kube_master(fake_api, leader__enabled=True, leader__identity="b"))
        wait_for(lambda: b.runtime.leader_url() == str(a.client.base_url), what="b sees a")
        assert b.put("n1", {"x": "1"}).headers["x-nfd-outcome"] == "forwarded"
        assert a.put("n2", {"z": "1"}).headers["x-nfd-outcome"] == "queued"  # straight to a
        wait_for(a.settled, what="a writes n1 and n2")
        # b copies what reached a directly (replication), so a takeover needs no resend.
        wait_for(lambda: b.client.get("/api/v1/nodes/n2").status_code == 200, what="b copies n2")
        assert b.view("n2")["digest"] == a.view("n2")["digest"]
        transitions = fake_api.lease(LEASE, NS)["spec"].get("leaseTransitions", 0)
        mark = fake_api.log.mark()
        with caplog.at_level(logging.INFO, logger="nfd.master.replication.leader"):
            a_stack.close()  # a stops and releases the lease
        assert any("releases the lease" in r.message and r.levelno == logging.INFO for r in caplog.records)
        assert not any("lost the lease" in r.message for r in caplog.records)
        wait_for(lambda: b.runtime.elector.leader, what="b leads")
        lease = fake_api.lease(LEASE, NS)["spec"]
        assert lease["holderIdentity"] == "b" and lease["leaseTransitions"] == transitions + 1
        wait_for(b.settled, what="b settles")
        # b holds both nodes' features: no resend needed, and the Nodes already match.
        for n in ("n1", "n2"):
            hb = b.client.post(f"/api/v1/nodes/{n}/heartbeat", json={"digest": b.view(n)["digest"]})
            assert hb.status_code == 200 and hb.headers["x-nfd-outcome"] == "queued"
        assert [w for w in fake_api.log.writes(since=mark) if w.resource.startswith("nodes")] == []
        b.put("n2", {"y": "1"})
        wait_for(lambda: f"{FNS}/fixture-y" in fake_api.labels("n2"), what="b writes")


def test_replication_endpoint_answers_only_the_leader_and_checks_its_body(fake_api):
    with (
        kube_master(fake_api, leader__enabled=True, leader__identity="m1") as m1,
        kube_master(fake_api, leader__enabled=True, leader__identity="m2") as m2,
    ):
        leader, follower = _leader_and_follower(m1, m2)
        assert follower.client.post("/api/v1/replication/nodes", json={"held": {}}).status_code == 409
        assert leader.client.post("/api/v1/replication/nodes", json={"held": []}).status_code == 422
        assert leader.client.post("/api/v1/replication/nodes", content=b"{").status_code == 422
        r = leader.client.post("/api/v1/replication/nodes", json={"held": {}})
        assert r.status_code == 200 and r.json() == {"items": [], "more": False}


def test_replication_needs_the_masters_token_when_auth_is_on(fake_api):
    fake_api.create_node("n1")
    master_token = fake_api.tokens.issue_service_account("node-feature-discovery", "nfd-master")
    worker = fake_api.issue_worker_token("n1")
    with kube_master(fake_api, auth__enabled=True) as m:
        url = "/api/v1/replication/nodes"
        assert m.client.post(url, json={"held": {}}).status_code == 401
        r = m.client.post(url, json={"held": {}}, headers={"Authorization": f"Bearer {worker}"})
        assert r.status_code == 403 and "nfd-worker" in r.json()["detail"]
        r = m.client.post(url, json={"held": {}}, headers={"Authorization": f"Bearer {master_token}"})
        assert r.status_code == 200


def test_readyz_during_an_api_server_outage_claims_no_lease(fake_api):
    with kube_master(fake_api, leader__enabled=True, leader__identity="solo") as m:
        wait_for(lambda: m.runtime.elector.leader, what="leads")
        assert m.client.get("/readyz").json()["detail"] == "leader"
        fake_api.faults.down()
        wait_for(lambda: "could not be renewed" in m.client.get("/readyz").json()["detail"], what="doubt")
        wait_for(lambda: not m.runtime.elector.leader, what="steps down")
        detail = m.client.get("/readyz").json()["detail"]
        assert "leader is unknown" in detail and "solo" not in detail
        fake_api.faults.up()
        wait_for(lambda: m.runtime.elector.leader, what="leads again")


def test_a_new_replica_is_ready_only_once_it_holds_the_leaders_nodes(fake_api):
    names = [f"n{i}" for i in range(5)]
    for n in names:
        fake_api.create_node(n)
    with kube_master(fake_api, leader__enabled=True, leader__identity="old") as old:
        wait_for(lambda: old.runtime.elector.holder_url, what="old leads, its URL on the Lease")
        for n in names:
            old.put(n, {"n": n})
        with kube_master(
            fake_api, leader__enabled=True, leader__identity="new", leader__replicate_interval_s=0.5
        ) as new:
            seen = []

            def ready() -> bool:
                r = new.client.get("/readyz")
                seen.append(r.json()["detail"])
                return r.status_code == 200

            wait_for(ready, what="new Ready")
            assert {r.name for r in new.runtime.service.store} == set(names)
            assert "copying the nodes' features from the leader" in seen
