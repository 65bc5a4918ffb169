"""Nodes through the real kubernetes client: get, list, patch (all three kinds), the
status subresource, update conflicts, create/delete, validation."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.fakeapi import FakeApiServer


def _status(e: ApiException) -> dict[str, Any]:
    body = json.loads(e.body)
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == e.status
    return body


def test_get_and_not_found(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("node-a")
    node = core_v1.read_node("node-a")
    assert node.metadata.name == "node-a"
    assert node.metadata.labels["kubernetes.io/hostname"] == "node-a"
    assert int(node.metadata.resource_version) > 0
    assert node.metadata.uid
    with pytest.raises(ApiException) as e:
        core_v1.read_node("missing")
    body = _status(e.value)
    assert e.value.status == 404
    assert body["reason"] == "NotFound"
    assert body["message"] == 'nodes "missing" not found'
    assert body["details"] == {"name": "missing", "kind": "nodes"}


def test_list_selectors_and_pagination(fake_api: FakeApiServer, core_v1: Any) -> None:
    for i in range(5):
        fake_api.create_node(f"node-{i}", labels={"pool": "gpu" if i % 2 else "cpu"})
    all_nodes = core_v1.list_node()
    assert [n.metadata.name for n in all_nodes.items] == [f"node-{i}" for i in range(5)]
    assert all_nodes.metadata.resource_version == str(fake_api.store.resource_version)
    assert {n.metadata.name for n in core_v1.list_node(label_selector="pool=gpu").items} == {
        "node-1",
        "node-3",
    }
    assert len(core_v1.list_node(label_selector="pool in (gpu,cpu),pool!=cpu").items) == 2
    assert len(core_v1.list_node(label_selector="!pool").items) == 0
    assert len(core_v1.list_node(label_selector="pool notin (gpu)").items) == 3
    assert [n.metadata.name for n in core_v1.list_node(field_selector="metadata.name=node-2").items] == [
        "node-2"
    ]
    with pytest.raises(ApiException) as e:
        core_v1.list_node(field_selector="spec.podCIDR=x")
    assert e.value.status == 400 and "field label not supported" in _status(e.value)["message"]

    page = core_v1.list_node(limit=2)
    names = [n.metadata.name for n in page.items]
    while page.metadata._continue:
        page = core_v1.list_node(limit=2, _continue=page.metadata._continue)
        names += [n.metadata.name for n in page.items]
    assert names == [f"node-{i}" for i in range(5)]


def test_json_patch_labels_with_escapes(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    before = fake_api.node("n")["metadata"]["resourceVersion"]
    out = core_v1.patch_node(
        "n",
        [
            {"op": "add", "path": "/metadata/labels/feature.node.kubernetes.io~1cpu-x", "value": "true"},
            {"op": "add", "path": "/metadata/annotations/example.com~1a", "value": "1"},
        ],
    )
    assert out.metadata.labels["feature.node.kubernetes.io/cpu-x"] == "true"
    assert out.metadata.annotations["example.com/a"] == "1"
    assert int(out.metadata.resource_version) > int(before)
    out = core_v1.patch_node(
        "n",
        [
            {"op": "test", "path": "/metadata/labels/feature.node.kubernetes.io~1cpu-x", "value": "true"},
            {"op": "replace", "path": "/metadata/labels/feature.node.kubernetes.io~1cpu-x", "value": "false"},
            {"op": "remove", "path": "/metadata/annotations/example.com~1a"},
        ],
    )
    assert out.metadata.labels["feature.node.kubernetes.io/cpu-x"] == "false"
    assert "example.com/a" not in out.metadata.annotations
    # "~0" is "~": a key that holds one is not a valid annotation name, so the
    # server's validation (not the patch) refuses it.
    with pytest.raises(ApiException) as e:
        core_v1.patch_node("n", [{"op": "add", "path": "/metadata/annotations/a~0b", "value": "1"}])
    assert e.value.status == 422 and '"a~b"' in _status(e.value)["message"]
    # The request went out as a JSON Patch, as the client picks for a list body.
    assert fake_api.log.records(verb="patch")[-1].content_type == "application/json-patch+json"


def test_json_patch_failed_test_is_422_and_changes_nothing(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n", labels={"x": "1"})
    before = fake_api.node("n")
    with pytest.raises(ApiException) as e:
        core_v1.patch_node(
            "n",
            [
                {"op": "add", "path": "/metadata/labels/y", "value": "2"},
                {"op": "test", "path": "/metadata/labels/x", "value": "other"},
            ],
        )
    assert e.value.status == 422
    body = _status(e.value)
    assert body["reason"] == "Invalid"
    assert body["message"] == "the server rejected our request due to an error in our request"
    assert fake_api.node("n") == before


@pytest.mark.parametrize(
    ("ops", "code"),
    [
        ([{"op": "remove", "path": "/metadata/labels/nope"}], 422),
        ([{"op": "replace", "path": "/metadata/nothere/key", "value": "v"}], 422),
        ([{"op": "test", "path": "/metadata/labels/nope", "value": "v"}], 422),
        ([{"op": "add", "path": "/metadata/nothere/key", "value": "v"}], 422),
        ([{"op": "frobnicate", "path": "/metadata/labels/x"}], 400),
        ([{"op": "add", "path": "/metadata/labels/x"}], 400),
    ],
)
def test_json_patch_errors(
    fake_api: FakeApiServer, core_v1: Any, ops: list[dict[str, Any]], code: int
) -> None:
    fake_api.create_node("n")
    with pytest.raises(ApiException) as e:
        core_v1.patch_node("n", ops)
    assert e.value.status == code
    _status(e.value)


def test_strategic_and_merge_patch(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n", labels={"drop": "me"})
    # A dict body goes out as a strategic merge patch.
    out = core_v1.patch_node("n", {"metadata": {"labels": {"new": "v", "drop": None}}})
    assert out.metadata.labels["new"] == "v" and "drop" not in out.metadata.labels
    assert out.metadata.labels["kubernetes.io/hostname"] == "n"
    assert fake_api.log.records(verb="patch")[-1].content_type == "application/strategic-merge-patch+json"
    out = core_v1.patch_node(
        "n", {"metadata": {"annotations": {"m": "1"}}}, _content_type="application/merge-patch+json"
    )
    assert out.metadata.annotations["m"] == "1"
    assert fake_api.log.records(verb="patch")[-1].content_type == "application/merge-patch+json"
    # Strategic merge merges conditions by type instead of replacing the list.
    core_v1.patch_node_status("n", {"status": {"conditions": [{"type": "Extra", "status": "True"}]}})
    kinds = {c["type"] for c in fake_api.node("n")["status"]["conditions"]}
    assert kinds == {"Ready", "Extra"}


def test_status_subresource_extended_resources(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    out = core_v1.patch_node_status(
        "n", [{"op": "add", "path": "/status/capacity/example.com~1widget", "value": "3"}]
    )
    assert out.status.capacity["example.com/widget"] == "3"
    assert "example.com/widget" not in fake_api.node("n")["status"]["allocatable"]
    fake_api.kubelet_sync("n")
    assert fake_api.node("n")["status"]["allocatable"]["example.com/widget"] == "3"
    # Writes to the node leave status alone; writes to nodes/status leave spec alone but,
    # as the API server's node status strategy does, keep metadata changes.
    core_v1.patch_node_status(
        "n", {"spec": {"unschedulable": True}, "metadata": {"labels": {"via-status": "1"}}}
    )
    assert "unschedulable" not in fake_api.node("n")["spec"]
    assert fake_api.labels("n")["via-status"] == "1"
    core_v1.patch_node("n", {"status": {"capacity": {"example.com/widget": "9"}}})
    assert fake_api.capacity("n")["example.com/widget"] == "3"
    got = core_v1.read_node_status("n")
    assert got.status.capacity["example.com/widget"] == "3"
    # Extended resources must be whole numbers ("1k" is one, "500m" is not).
    for bad in ("0.5", "500m", "lots"):
        with pytest.raises(ApiException) as e:
            core_v1.patch_node_status(
                "n", [{"op": "add", "path": "/status/capacity/example.com~1x", "value": bad}]
            )
        assert e.value.status == 422 and _status(e.value)["reason"] == "Invalid"
    core_v1.patch_node_status("n", [{"op": "add", "path": "/status/capacity/example.com~1x", "value": "1k"}])
    assert fake_api.capacity("n")["example.com/x"] == "1k"


def test_invalid_label_rejected(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    with pytest.raises(ApiException) as e:
        core_v1.patch_node("n", {"metadata": {"labels": {"bad key!": "v"}}})
    body = _status(e.value)
    assert e.value.status == 422
    assert body["reason"] == "Invalid"
    assert body["message"].startswith('Node "n" is invalid: metadata.labels')
    assert body["details"]["causes"][0]["field"] == "metadata.labels"
    with pytest.raises(ApiException) as e:
        core_v1.patch_node("n", {"metadata": {"labels": {"ok": "x" * 64}}})
    assert e.value.status == 422


def test_update_conflict_and_noop(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n")
    node = core_v1.read_node("n")
    node.metadata.labels["a"] = "1"
    updated = core_v1.replace_node("n", node)
    assert updated.metadata.labels["a"] == "1"
    node.metadata.labels["a"] = "2"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as e:
        core_v1.replace_node("n", node)
    body = _status(e.value)
    assert e.value.status == 409 and body["reason"] == "Conflict"
    assert body["message"].startswith(
        'Operation cannot be fulfilled on nodes "n": the object has been modified'
    )
    # A patch that pins a stale resourceVersion conflicts too.
    with pytest.raises(ApiException) as e:
        core_v1.patch_node(
            "n", {"metadata": {"resourceVersion": node.metadata.resource_version, "labels": {"b": "1"}}}
        )
    assert e.value.status == 409
    # Writing what is already there makes no new resourceVersion.
    rv = fake_api.node("n")["metadata"]["resourceVersion"]
    out = core_v1.patch_node("n", {"metadata": {"labels": {"a": "1"}}})
    assert out.metadata.resource_version == rv
    # The name in the body must match the URL.
    node = core_v1.read_node("n")
    node.metadata.name = "other"
    with pytest.raises(ApiException) as e:
        core_v1.replace_node("n", node)
    assert e.value.status == 400


def test_create_delete(fake_api: FakeApiServer, core_v1: Any) -> None:
    body = client.V1Node(metadata=client.V1ObjectMeta(name="made", labels={"k": "v"}))
    created = core_v1.create_node(body)
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert fake_api.labels("made") == {"k": "v"}
    with pytest.raises(ApiException) as e:
        core_v1.create_node(body)
    assert e.value.status == 409 and _status(e.value)["reason"] == "AlreadyExists"
    status = core_v1.delete_node("made")  # the client hands the Status back as a dict
    assert status["kind"] == "Status" and status["status"] == "Success"
    assert status["details"]["name"] == "made" and status["details"]["uid"] == created.metadata.uid
    with pytest.raises(ApiException) as e:
        core_v1.delete_node("made")
    assert e.value.status == 404


def test_recreate_node_drops_extended_resources(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node(
        "n", labels={"feature.node.kubernetes.io/x": "true"}, capacity={"example.com/w": "2"}
    )
    old_uid = fake_api.node("n")["metadata"]["uid"]
    fake_api.recreate_node("n")
    node = core_v1.read_node("n")
    assert node.metadata.uid != old_uid
    assert "example.com/w" not in node.status.capacity
    assert "feature.node.kubernetes.io/x" not in node.metadata.labels
    assert node.metadata.labels["kubernetes.io/hostname"] == "n"


def test_unknown_path_and_media_type(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(fake_api.url + "/api/v1/widgets")
    assert err.value.code == 404
    body = json.loads(err.value.read())
    assert (
        body["reason"] == "NotFound" and body["message"] == "the server could not find the requested resource"
    )
    fake_api.create_node("n")
    with pytest.raises(ApiException) as e:
        client.CoreV1Api(fake_api_client).patch_node("n", {"metadata": {}}, _content_type="application/yaml")
    assert e.value.status == 415
    assert _status(e.value)["reason"] == "UnsupportedMediaType"
