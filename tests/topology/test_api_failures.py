"""The API server failing: a refused write is retried by the next pass, a conflict costs
one GET, a broken watch is listed and watched again."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fixture_node import pods
from podresources_standin import PodResourcesStandIn
from test_fixture_node import NODE, resources, start

from nfd.hostroot import HostRoot
from tests.fakeapi import FakeApiServer

NRT = "noderesourcetopologies.topology.node.k8s.io"


def test_refused_write_is_logged_and_retried_next_pass(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    updater, writer, watch, _ = start(fake_api, host, kubelet, kubelet_config)
    try:
        assert updater.run_once()
        left = pods()
        del left.pod_resources[0]
        kubelet.pods = left
        fake_api.faults.fail(500, times=1, verb="update", resource=NRT)
        with caplog.at_level(logging.WARNING, logger="nfd.topology"):
            assert updater.run_once() is False
        assert any("writing NodeResourceTopology numa-node" in r.getMessage() for r in caplog.records)
        assert writer.writes == 1
        assert updater.run_once() is True
        assert writer.writes == 2
    finally:
        watch.stop()
    zone1 = resources(fake_api.objects.get("noderesourcetopologies", NODE)["zones"][1])
    assert zone1["cpu"] == ("24", "24", "24")


def test_someone_elses_write_costs_one_get(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path
) -> None:
    updater, _writer, watch, _ = start(fake_api, host, kubelet, kubelet_config)
    try:
        assert updater.run_once()
        # Another writer adds a label: our kept resourceVersion is stale now.
        fake_api.objects.modify(
            "noderesourcetopologies",
            NODE,
            lambda o: {**o, "metadata": {**o["metadata"], "labels": {"x": "y"}}},
        )
        left = pods()
        del left.pod_resources[0]
        kubelet.pods = left
        mark = fake_api.log.mark()
        assert updater.run_once() is True
    finally:
        watch.stop()
    calls = [(r.verb, r.status) for r in fake_api.log.records(since=mark, resource=NRT)]
    assert calls == [("update", 409), ("get", 200), ("update", 200)]
    got = fake_api.objects.get("noderesourcetopologies", NODE)
    assert got["metadata"]["labels"] == {"x": "y"}  # theirs kept


def test_broken_watch_is_listed_and_watched_again(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path
) -> None:
    _updater, _writer, watch, _ = start(fake_api, host, kubelet, kubelet_config)
    try:
        fake_api.faults.down(mode="reset")
        # Down until the broken watch has tried the server again (its request dropped
        # unanswered), however late a loaded machine runs the watch's thread.
        fake_api.wait_for(
            lambda: any(r.status == 0 and r.path == "/api/v1/pods" for r in fake_api.log.records()),
            timeout=20,
            what="the broken watch trying again",
        )
        fake_api.faults.up()
        fake_api.objects.delete("pods", "db", namespace="prod")
        fake_api.wait_for(
            lambda: watch.is_exclusive("prod", "db", "main") is None, timeout=20, what="watch back"
        )
        assert watch.is_exclusive("ml", "train", "trainer") is True
        assert fake_api.log.count(verb="list", resource="pods") >= 2  # it was broken, and listed again
    finally:
        watch.stop()
