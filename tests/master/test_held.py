"""What a follower holds (the leader's address not read yet, or the leader unreachable)
reaches the leader once it can, with no resend from the worker; the leader never takes
older features over what it got since."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import SimpleNamespace
from typing import Any

from nfd.config import WorkerConfig
from nfd.master.core.metrics import Metrics
from nfd.master.decisions.decide import Decider
from nfd.master.decisions.service import MasterService
from nfd.master.replication.leader import URL_ANNOTATION
from nfd.master.replication.replica import Replica, own_key
from nfd.policy import Policy

from .helpers import FixtureSource, features_with
from .kubehelpers import MasterHandle, kube_master, wait_for

FNS = "feature.node.kubernetes.io"
LEASE = "nfd-master.nfd.kubernetes.io"
NS = "node-feature-discovery"


@contextmanager
def leader_without_address(fake_api) -> Iterator[tuple[MasterHandle, MasterHandle, str, ExitStack]]:
    """Replica a leads but its address is not on the Lease yet; b follows without it.
    Yields a, b, a's address (for the test to publish) and what stops a."""
    with ExitStack() as stack:
        a_stack = ExitStack()
        stack.push(a_stack)
        a = a_stack.enter_context(kube_master(fake_api, leader__enabled=True, leader__identity="a"))
        wait_for(lambda: a.runtime.elector.leader, what="a leads")
        url, a.runtime.elector.advertise_url = a.runtime.elector.advertise_url, ""
        wait_for(lambda: URL_ANNOTATION not in _annotations(fake_api), what="no URL on the Lease")
        b = stack.enter_context(kube_master(fake_api, leader__enabled=True, leader__identity="b"))
        wait_for(lambda: b.runtime.elector.holder == "a", what="b sees a hold the lease")
        assert b.runtime.leader_url() is None
        yield a, b, url, a_stack


def _annotations(fake_api) -> dict[str, str]:
    return fake_api.lease(LEASE, NS)["metadata"].get("annotations") or {}


def test_what_a_follower_held_before_it_knew_the_leader_reaches_the_leader(fake_api):
    fake_api.create_node("n1")
    fake_api.create_node("n2")
    with leader_without_address(fake_api) as (a, b, url, _stop_a):
        r = b.put("n1", {"x": "1"})
        assert r.status_code == 200 and r.headers["x-nfd-outcome"] == "held"
        # Newer features of a held node supersede the older: only the last reaches a.
        b.put("n2", {"y": "1"})
        r2 = b.put("n2", {"y": "2"})
        assert r2.headers["x-nfd-outcome"] == "held"
        assert a.client.get("/api/v1/nodes/n1").status_code == 404
        a.runtime.elector.advertise_url = url  # b reads it on the Lease
        wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-x") == "1", what="a writes n1")
        wait_for(lambda: fake_api.labels("n2").get(f"{FNS}/fixture-y") == "2", what="a writes n2")
        assert a.view("n1")["digest"] == r.json()["digest"]
        assert a.view("n2")["digest"] == r2.json()["digest"]
        wait_for(lambda: not b.runtime.replica.held, what="b holds nothing for a")
        wait_for(a.settled, what="a settles")
        # n2's older features were never written.
        patches = fake_api.log.records(verb="patch", resource="nodes")
        assert len(patches) == 2


def test_the_leader_keeps_what_it_got_since_over_what_a_follower_held(fake_api):
    fake_api.create_node("n1")
    with leader_without_address(fake_api) as (a, b, url, _stop_a):
        assert b.put("n1", {"x": "old"}).headers["x-nfd-outcome"] == "held"
        # The worker then reaches a directly with newer features.
        newer = a.put("n1", {"x": "new"})
        assert newer.headers["x-nfd-outcome"] == "queued"
        wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-x") == "new", what="a writes n1")
        a.runtime.elector.advertise_url = url
        # b hands over what it held, a keeps its own, and b copies a's.
        wait_for(lambda: not b.runtime.replica.held, what="b settled what it held")
        wait_for(lambda: b.view("n1")["digest"] == newer.json()["digest"], what="b copies a's n1")
        wait_for(a.settled, what="a settles")
        assert a.view("n1")["digest"] == newer.json()["digest"]
        assert fake_api.labels("n1")[f"{FNS}/fixture-x"] == "new"
        assert len(fake_api.log.records(verb="patch", resource="nodes")) == 1


def test_what_a_follower_held_for_an_unreachable_leader_is_retried_until_taken(fake_api):
    fake_api.create_node("n1")
    with kube_master(fake_api, leader__enabled=True, leader__identity="a") as a:
        wait_for(lambda: a.runtime.elector.leader, what="a leads")
        url, a.runtime.elector.advertise_url = a.runtime.elector.advertise_url, "http://127.0.0.1:9"
        with kube_master(fake_api, leader__enabled=True, leader__identity="b") as b:
            wait_for(
                lambda: b.runtime.leader_url() == "http://127.0.0.1:9", what="b sees a's unreachable URL"
            )
            assert b.put("n1", {"x": "1"}).headers["x-nfd-outcome"] == "held"
            failed = b.runtime.replica.failures
            # A whole round since (its hand-over first) could not reach a.
            wait_for(lambda: b.runtime.replica.failures >= failed + 2, what="a failed hand-over")
            assert b.runtime.replica.held
            a.runtime.elector.advertise_url = url
            wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-x") == "1", what="a writes n1")
            wait_for(lambda: not b.runtime.replica.held, what="b holds nothing for a")


def test_an_unreachable_leader_is_logged_as_it_starts_and_as_it_ends(fake_api, caplog):
    # Fails on main: a line for every forward and every replication round.
    fake_api.create_node("n1")
    with kube_master(fake_api, leader__enabled=True, leader__identity="a") as a:
        wait_for(lambda: a.runtime.elector.leader, what="a leads")
        url, a.runtime.elector.advertise_url = a.runtime.elector.advertise_url, "http://127.0.0.1:9"
        with (
            kube_master(fake_api, leader__enabled=True, leader__identity="b") as b,
            caplog.at_level(logging.INFO, logger="nfd.master"),
        ):
            wait_for(lambda: b.runtime.leader_url() == "http://127.0.0.1:9", what="b sees a's URL")
            for x in range(3):
                assert b.put("n1", {"x": str(x)}).headers["x-nfd-outcome"] == "held"
            failed = b.runtime.replica.failures
            wait_for(lambda: b.runtime.replica.failures >= failed + 3, what="three more rounds fail")
            a.runtime.elector.advertise_url = url
            wait_for(lambda: not b.runtime.replica.held, what="b hands n1 over")
    lines = [
        (r.levelname, r.getMessage())
        for r in caplog.records
        if r.name in (f"nfd.master.replication.{m}" for m in ("peers", "replica", "forward"))
    ]
    assert len(lines) == 2, lines
    (start_level, start), (end_level, end) = lines
    assert start_level == "WARNING" and start.startswith("cannot reach the leader at http://127.0.0.1:9: ")
    assert end_level == "INFO" and end.startswith(
        "cannot reach the leader at http://127.0.0.1:9: over after "
    )
    tries = int(re.search(r"and (\d+) failed tries", end).group(1))  # type: ignore[union-attr]
    assert tries >= 6  # three forwards, three rounds at least


def test_a_follower_that_takes_over_has_nothing_to_hand_over(fake_api):
    fake_api.create_node("n1")
    with leader_without_address(fake_api) as (_a, b, _url, stop_a):
        assert b.put("n1", {"x": "1"}).headers["x-nfd-outcome"] == "held"
        assert b.runtime.replica.held
        stop_a.close()  # a stops and releases the lease
        wait_for(lambda: b.runtime.elector.leader, what="b leads")
        # What b holds is what counts now: it writes it, and hands nothing over.
        wait_for(lambda: not b.runtime.replica.held, what="b drops its hand-over list")
        wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-x") == "1", what="b writes what it held")


def test_held_features_replace_what_the_leader_held_when_the_follower_knew_it(fake_api):
    fake_api.create_node("n1")
    with kube_master(fake_api, leader__enabled=True, leader__identity="a") as a:
        wait_for(lambda: a.runtime.elector.leader, what="a leads")
        first = a.put("n1", {"x": "0"})  # straight to a
        with kube_master(fake_api, leader__enabled=True, leader__identity="b") as b:
            wait_for(lambda: b.client.get("/api/v1/nodes/n1").status_code == 200, what="b copies n1")
            url, a.runtime.elector.advertise_url = a.runtime.elector.advertise_url, ""
            wait_for(lambda: b.runtime.leader_url() is None, what="b no longer knows a's address")
            held = b.put("n1", {"x": "1"})
            assert held.headers["x-nfd-outcome"] == "held"
            a.runtime.elector.advertise_url = url
            wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-x") == "1", what="a takes b's n1")
            assert a.view("n1")["digest"] == held.json()["digest"]
            # The worker goes back to what it first sent a: a answers for that body, not
            # for the features it took from b.
            again = a.put("n1", {"x": "0"})
            assert again.json()["digest"] == first.json()["digest"]
            wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-x") == "0", what="a writes it")


def test_hand_over_endpoint_answers_only_the_leader_and_checks_its_body(fake_api):
    with (
        kube_master(fake_api, leader__enabled=True, leader__identity="m1") as m1,
        kube_master(fake_api, leader__enabled=True, leader__identity="m2") as m2,
    ):
        wait_for(lambda: m1.runtime.elector.leader or m2.runtime.elector.leader, what="a leader")
        leader, follower = (m1, m2) if m1.runtime.elector.leader else (m2, m1)
        wait_for(lambda: follower.runtime.leader_url() is not None, what="the follower knows the leader")
        url = "/api/v1/replication/held"
        item = {"node": "n1", "base": "", "features": features_with({"x": "1"})}
        assert follower.client.post(url, json={"items": [item]}).status_code == 409
        assert leader.client.post(url, content=b"{").status_code == 422
        r = leader.client.post(url, json={"items": [{**item, "node": "N_1"}]})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "items", 0, "node"]
        r = leader.client.post(url, json={"items": [{"node": "n1", "features": {}}]})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "items", 0, "base"]
        r = leader.client.post(url, json={"items": [item]})
        assert r.status_code == 200 and r.json() == {"taken": ["n1"], "kept": []}
        # Again with the same base: the leader holds other features than that now.
        r = leader.client.post(url, json={"items": [{**item, "features": features_with({"x": "2"})}]})
        assert r.json() == {"taken": [], "kept": ["n1"]}
        assert leader.view("n1")["labels"] == {f"{FNS}/fixture-x": "1"}


def test_hand_over_needs_the_masters_token_when_auth_is_on(fake_api):
    master_token = fake_api.tokens.issue_service_account("node-feature-discovery", "nfd-master")
    worker = fake_api.issue_worker_token("n1")
    body = {"items": [{"node": "n1", "base": "", "features": features_with({"x": "1"})}]}
    with kube_master(fake_api, auth__enabled=True) as m:
        url = "/api/v1/replication/held"
        assert m.client.post(url, content=b"{").status_code == 401  # the token before the body
        r = m.client.post(url, json=body, headers={"Authorization": f"Bearer {worker}"})
        assert r.status_code == 403
        r = m.client.post(url, json=body, headers={"Authorization": f"Bearer {master_token}"})
        assert r.status_code == 200 and r.json()["taken"] == ["n1"]


def test_held_features_reach_the_leader_for_a_node_with_nodefeature_objects(fake_api):
    # The leader merges the object's features into the worker's; what the follower
    # copied and what it hands over must still be the worker's own, else the leader
    # sees another base and keeps the older features.
    fake_api.create_node("n1")
    fake_api.objects.create(
        "nodefeatures",
        {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeature",
            "metadata": {
                "name": "gfd",
                "namespace": NS,
                "labels": {"nfd.node.kubernetes.io/node-name": "n1"},
            },
            "spec": {"features": {"attributes": {"fixture.extra": {"elements": {"gpu": "1"}}}}},
        },
        NS,
    )
    with kube_master(fake_api, leader__enabled=True, leader__identity="a") as a:
        wait_for(lambda: a.runtime.elector.leader, what="a leads")
        a.put("n1", {"x": "0"})
        with kube_master(fake_api, leader__enabled=True, leader__identity="b") as b:
            wait_for(lambda: b.view("n1")["digest"] == a.view("n1")["digest"], what="b copies n1")
            url, a.runtime.elector.advertise_url = a.runtime.elector.advertise_url, ""
            wait_for(lambda: b.runtime.leader_url() is None, what="b no longer knows a's address")
            assert b.put("n1", {"x": "1"}).headers["x-nfd-outcome"] == "held"
            a.runtime.elector.advertise_url = url
            wait_for(lambda: not b.runtime.replica.held, what="b settled what it held")
            wait_for(lambda: fake_api.labels("n1").get(f"{FNS}/fixture-x") == "1", what="a takes b's n1")


async def test_a_node_held_again_during_a_hand_over_keeps_its_newer_base() -> None:
    # While the hand-over of x=1 is on its way, the worker's x=2 is forwarded (the leader
    # holds it) and its x=3 held. The leader took x=1 before x=2 came; what it holds for
    # the node is x=2's key, so that is the base x=3 goes with next round.
    svc = MasterService(
        decider=Decider(sources=[FixtureSource()], config=WorkerConfig(), policy=Policy()), metrics=Metrics()
    )
    rt = SimpleNamespace(service=svc, own_token=lambda: "")
    replica = Replica(rt)  # type: ignore[arg-type]
    svc.submit("n1", features=features_with({"x": "1"}))
    replica.hold("n1", "")
    x2: list[str] = []

    async def send(
        url: str, method: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[Any], bytes]:
        svc.submit("n1", features=features_with({"x": "2"}))
        replica.passed("n1")
        x2.append(own_key(svc.store.get("n1")))
        svc.submit("n1", features=features_with({"x": "3"}))
        replica.hold("n1", x2[0])
        return 200, [], json.dumps({"taken": ["n1"], "kept": []}).encode()

    rt.forwarder = SimpleNamespace(send=send)
    await replica.hand_over("http://leader")
    assert replica.held == {"n1": x2[0]}
