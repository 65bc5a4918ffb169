"""Watches through the real client's ``kubernetes.watch.Watch``."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

from kubernetes import client, watch

from tests.fakeapi import FakeApiServer


def _collect(func: Any, count: int, **kwargs: Any) -> list[tuple[str, Any]]:
    got: list[tuple[str, Any]] = []
    w = watch.Watch()
    for ev in w.stream(func, **kwargs):
        got.append((ev["type"], ev["object"]))
        if len(got) >= count:
            w.stop()
    return got


def test_watch_from_resource_version_sees_changes(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("a")
    rv = core_v1.list_node().metadata.resource_version

    def write() -> None:
        fake_api.create_node("b")
        core_v1.patch_node("a", {"metadata": {"labels": {"x": "1"}}})
        core_v1.delete_node("b")

    t = threading.Thread(target=write)
    t.start()
    events = _collect(core_v1.list_node, 3, resource_version=rv, timeout_seconds=10)
    t.join()
    assert [(k, o.metadata.name) for k, o in events] == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    assert events[1][1].metadata.labels["x"] == "1"
    rvs = [int(o.metadata.resource_version) for _, o in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


def test_watch_without_resource_version_starts_with_current_objects(
    fake_api: FakeApiServer, core_v1: Any
) -> None:
    fake_api.create_node("a")
    fake_api.create_node("b")
    events = _collect(core_v1.list_node, 2, timeout_seconds=5)
    assert sorted((k, o.metadata.name) for k, o in events) == [("ADDED", "a"), ("ADDED", "b")]


def test_watch_selector_transitions(fake_api: FakeApiServer, core_v1: Any) -> None:
    """An object that starts or stops matching the selector arrives as ADDED/DELETED."""
    fake_api.create_node("a")
    rv = str(fake_api.store.resource_version)

    def write() -> None:
        core_v1.patch_node("a", {"metadata": {"labels": {"pick": "yes"}}})
        core_v1.patch_node("a", {"metadata": {"labels": {"other": "1"}}})
        core_v1.patch_node("a", {"metadata": {"labels": {"pick": None}}})

    t = threading.Thread(target=write)
    t.start()
    events = _collect(
        core_v1.list_node, 3, resource_version=rv, label_selector="pick=yes", timeout_seconds=10
    )
    t.join()
    assert [k for k, _ in events] == ["ADDED", "MODIFIED", "DELETED"]


def test_watch_times_out_and_old_resource_version_expires(fake_api: FakeApiServer) -> None:
    fake_api.create_node("a")
    # timeoutSeconds ends the stream cleanly with no events.
    url = f"{fake_api.url}/api/v1/nodes?watch=true&resourceVersion={fake_api.store.resource_version}&timeoutSeconds=1"
    with urllib.request.urlopen(url) as resp:
        assert resp.headers["Content-Type"] == "application/json"
        assert resp.headers["Transfer-Encoding"] == "chunked"
        assert resp.read() == b""
    # A resourceVersion older than the history answers 410 Expired.
    url = f"{fake_api.url}/api/v1/nodes?watch=true&resourceVersion=1"
    try:
        urllib.request.urlopen(url)
        raise AssertionError("expected 410")
    except urllib.error.HTTPError as e:
        assert e.code == 410
        assert json.loads(e.read())["reason"] == "Expired"


def test_watch_custom_objects(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    api = client.CustomObjectsApi(fake_api_client)
    rv = str(fake_api.store.resource_version)

    def write() -> None:
        fake_api.create_rule("r1", [{"name": "x", "labels": {"a": "b"}}])

    t = threading.Thread(target=write)
    t.start()
    events = _collect(
        api.list_cluster_custom_object,
        1,
        group="nfd.k8s-sigs.io",
        version="v1alpha1",
        plural="nodefeaturerules",
        resource_version=rv,
        timeout_seconds=10,
    )
    t.join()
    kind, obj = events[0]
    assert kind == "ADDED" and obj["metadata"]["name"] == "r1" and obj["kind"] == "NodeFeatureRule"


def test_watch_history_is_bounded() -> None:
    """Like the API server's watch cache: a watch from a resourceVersion the history no
    longer reaches gets 410 Expired; recent ones still resume."""
    with FakeApiServer(watch_history=10) as api:
        api.create_node("n")
        start = api.store.resource_version
        for i in range(30):
            api.objects.modify("nodes", "n", lambda o, i=i: o["metadata"]["labels"].update(i=str(i)))
        v1 = client.CoreV1Api(api.api_client())
        try:
            _collect(v1.list_node, 1, resource_version=str(start), timeout_seconds=5)
            raise AssertionError("expected 410")
        except client.rest.ApiException as e:
            assert e.status == 410
        recent = str(api.store.resource_version - 3)
        events = _collect(v1.list_node, 3, resource_version=recent, timeout_seconds=5)
        assert [o.metadata.labels["i"] for _, o in events] == ["27", "28", "29"]
