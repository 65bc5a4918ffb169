"""Retries, an API server outage, and a restart that must not flap labels."""

from __future__ import annotations

import time

import pytest

from .kubehelpers import kube_master, wait_for

FNS = "feature.node.kubernetes.io"


@pytest.mark.parametrize("status", [409, 429, 500, 503])
def test_patch_retried_after_injected_error(fake_api, status):
    fake_api.create_node("n1")
    fake_api.faults.fail(status, times=2, verb="patch", resource="nodes")
    with kube_master(fake_api) as m:
        m.put("n1", {"a": "1"})
        wait_for(m.settled, what="publish after retries")
        assert fake_api.labels("n1")[f"{FNS}/fixture-a"] == "1"
        patches = fake_api.log.records(verb="patch", resource="nodes")
        assert [p.status for p in patches] == [status, status, 200]
        gets = fake_api.log.count(verb="get", resource="nodes")
        # A conflict means the master's view is stale: it reads the Node again each time.
        assert gets == (2 if status == 409 else 0)
        assert (
            f'nfd_master_node_update_failures_total{{reason="{status}"}} 2.0' in m.client.get("/metrics").text
        )


def test_conflict_recomputes_against_the_fresh_node(fake_api):
    """Someone else removes our label between our read and our patch: after the 409 the
    master re-reads the Node and its patch puts the label back."""
    fake_api.create_node("n1")
    with kube_master(fake_api) as m:
        m.put("n1", {"a": "1"})
        wait_for(m.settled, what="publish")

        def drop(obj):
            obj["metadata"]["labels"].pop(f"{FNS}/fixture-a")

        fake_api.objects.modify("nodes", "n1", drop)
        fake_api.faults.fail(409, times=1, verb="patch", resource="nodes")
        m.put("n1", {"a": "1", "b": "2"})
        wait_for(m.settled, what="publish")
        labels = fake_api.labels("n1")
        assert labels[f"{FNS}/fixture-a"] == "1" and labels[f"{FNS}/fixture-b"] == "2"


@pytest.mark.parametrize("mode", ["503", "reset"])
def test_api_server_down_then_back_latest_features_applied(fake_api, mode):
    fake_api.create_node("n1")
    fake_api.create_node("n2")
    with kube_master(fake_api) as m:
        fake_api.faults.down(mode=mode)
        m.put("n1", {"v": "1"})
        m.put("n2", {"v": "1"})
        wait_for(lambda: m.view("n1")["lastError"], what="a failed attempt")
        m.put("n1", {"v": "2"})  # newer features while the API server is away
        m.put("n1", {"v": "3"})
        assert m.client.get("/api/v1/nodes/n1").json()["inSync"] is False
        fake_api.faults.up()
        wait_for(m.settled, what="publish after the outage")
        assert fake_api.labels("n1")[f"{FNS}/fixture-v"] == "3"
        assert fake_api.labels("n2")[f"{FNS}/fixture-v"] == "1"
        ok = [r.name for r in fake_api.log.records(verb="patch", resource="nodes", status=200)]
        # n2 changed once: one write (with connections dropped unanswered, a write may
        # land unheard and be repeated, idempotently). n1's three versions: the newest
        # written, plus at most one older write already on the wire when the API server
        # came back; the versions queued meanwhile were coalesced, never written.
        assert ok.count("n2") == 1 if mode == "503" else 1 <= ok.count("n2") <= 2
        assert 1 <= ok.count("n1") <= 2


def test_restart_neither_removes_nor_re_adds(fake_api):
    fake_api.create_node("n1", labels={"team.example.com/x": "y"})
    with kube_master(fake_api) as m:
        m.put("n1", {"a": "1", "b": "2"})
        wait_for(m.settled, what="publish")
    before = fake_api.node("n1")
    mark = fake_api.log.mark()
    with kube_master(fake_api) as m2:  # a new master: knows nothing, reads the Node
        assert m2.client.get("/readyz").status_code == 200
        m2.put("n1", {"a": "1", "b": "2"})
        wait_for(m2.settled, what="settle")
        assert fake_api.log.writes(since=mark) == []
        # It learnt what it owns from the Node (one LIST at its start), not from memory.
        assert fake_api.log.count(since=mark, verb="list", resource="nodes") == 1
    after = fake_api.node("n1")
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_restart_with_changed_features_removes_only_stale_own_labels(fake_api):
    fake_api.create_node("n1", labels={f"{FNS}/by-hand": "1"})
    with kube_master(fake_api) as m:
        m.put("n1", {"a": "1", "b": "2"})
        wait_for(m.settled, what="publish")
    mark = fake_api.log.mark()
    with kube_master(fake_api) as m2:
        m2.put("n1", {"a": "1"})
        wait_for(m2.settled, what="settle")
        (patch,) = fake_api.log.writes(since=mark)
        assert patch.resource_path == "nodes"
    labels = fake_api.labels("n1")
    assert f"{FNS}/fixture-b" not in labels
    assert labels[f"{FNS}/fixture-a"] == "1" and labels[f"{FNS}/by-hand"] == "1"


def test_node_missing_is_not_retried_until_it_sends_again(fake_api):
    with kube_master(fake_api) as m:
        mark = fake_api.log.mark()
        m.put("late", {"a": "1"})
        wait_for(lambda: "no Node 'late' in the cluster" in m.view("late")["lastError"], what="a 404")
        assert m.view("late")["inSync"] is False
        time.sleep(1.0)  # backoff 0.01-0.2 s: a retrying master would have read it again by now
        reads = [
            r for r in fake_api.log.records(since=mark) if r.resource_path == "nodes" and r.verb == "get"
        ]
        assert len(reads) == 1
        assert m.runtime.publisher.idle()
        fake_api.create_node("late")
        m.put("late", {"a": "1"})  # its worker's next request: one more try
        wait_for(m.settled, what="publish once the Node exists")
        assert fake_api.labels("late")[f"{FNS}/fixture-a"] == "1"


def test_node_missing_is_published_when_the_resync_lists_it(fake_api):
    with kube_master(fake_api, kube__resync_period_s=0.3) as m:
        m.put("late", {"a": "1"})
        wait_for(lambda: "no Node" in m.view("late")["lastError"], what="a 404")
        fake_api.create_node("late")
        wait_for(m.settled, what="publish at the resync")
        assert fake_api.labels("late")[f"{FNS}/fixture-a"] == "1"


def test_deleted_node_is_forgotten_at_resync(fake_api):
    fake_api.create_node("stay")
    fake_api.create_node("gone")
    with kube_master(fake_api, kube__resync_period_s=0.2) as m:
        m.put("stay", {"a": "1"})
        m.put("gone", {"a": "1"})
        wait_for(m.settled, what="publish")
        fake_api.delete_node("gone")
        wait_for(lambda: m.client.get("/api/v1/nodes/gone").status_code == 404, what="forgotten")
        assert m.view("stay")["inSync"] is True
        assert "nfd_master_nodes 1.0" in m.client.get("/metrics").text
        # Its worker, if still running, is welcome back: the record is made anew.
        assert m.put("gone", {"a": "1"}).status_code == 200
