"""Patch computation: only what the master owns changes, nothing when in sync."""

from __future__ import annotations

import json

import pytest

from nfd.decision import Decision
from nfd.master.publishing.patches import (
    ER_ANN,
    LABELS_ANN,
    TAINTS_ANN,
    escape,
    merge_patch,
    node_patch,
    observe,
    status_patch,
)
from nfd.taint import Taint
from tests.fakeapi.patch import apply_merge_patch, json_equal

from .helpers import apply_json_patch

FNS = "feature.node.kubernetes.io"


def node(labels=None, annotations=None, capacity=None, taints=None):
    n = {"metadata": {"name": "n1", "labels": labels or {}, "annotations": annotations or {}},
         "spec": {}, "status": {"capacity": dict(capacity or {}), "allocatable": dict(capacity or {})}}  # fmt: skip
    if taints is not None:
        n["spec"]["taints"] = taints
    return n


def apply(n, decision, dpr=()):
    """The Node after the patches, and the patches. Every case below also checks that
    the merge patches the master sends do what the JSON Patches do."""
    obs = observe(n, decision)
    ops = node_patch(decision, obs, device_plugin_resources=dpr)
    sops = status_patch(decision, obs, device_plugin_resources=dpr)
    out = apply_json_patch(n, ops + sops)
    merged = n
    for patch in (ops, sops):
        if patch:
            merge = merge_patch(patch)
            assert merge is not None, patch
            merged = apply_merge_patch(merged, merge)
    assert json_equal(merged, out), (merged, out)
    return out, ops, sops


def test_escape_follows_rfc6901():
    assert escape("a/b~c") == "a~1b~0c"


def test_first_labelling_adds_labels_and_tracking_annotation():
    d = Decision(labels={f"{FNS}/cpu-x": "true", "example.com/y": "1"})
    out, ops, _ = apply(node(labels={"kubernetes.io/hostname": "n1"}), d)
    assert out["metadata"]["labels"] == {
        "kubernetes.io/hostname": "n1",
        f"{FNS}/cpu-x": "true",
        "example.com/y": "1",
    }
    # Default-namespace names are tracked without the namespace, as upstream does.
    assert out["metadata"]["annotations"][LABELS_ANN] == "cpu-x,example.com/y"
    assert {"op": "add", "path": f"/metadata/labels/{FNS.replace('/', '~1')}~1cpu-x", "value": "true"} in ops


def test_in_sync_node_needs_no_patch():
    d = Decision(labels={f"{FNS}/a": "1"}, extended_resources={f"{FNS}/r": "4"})
    out, _, _ = apply(node(), d)
    _, ops, sops = apply(out, d)
    assert ops == [] and sops == []


def test_stale_own_labels_removed_foreign_kept():
    d1 = Decision(labels={f"{FNS}/a": "1", f"{FNS}/b": "2"})
    out, _, _ = apply(node(labels={"team": "x", f"{FNS}/foreign": "z"}), d1)
    out, ops, _ = apply(out, Decision(labels={f"{FNS}/a": "1"}))
    assert out["metadata"]["labels"] == {"team": "x", f"{FNS}/foreign": "z", f"{FNS}/a": "1"}
    assert [o["op"] for o in ops] == ["remove", "add"]  # the label, then the annotation
    out, _, _ = apply(out, Decision())
    assert out["metadata"]["labels"] == {"team": "x", f"{FNS}/foreign": "z"}
    assert LABELS_ANN not in out["metadata"]["annotations"]


def test_ownership_is_read_from_the_node_after_restart():
    """A master that remembers nothing reads its annotation: it removes its stale label
    and touches nothing else (upstream #2408)."""
    n = node(labels={f"{FNS}/a": "1", f"{FNS}/old": "1", f"{FNS}/other": "1"},
             annotations={LABELS_ANN: "a,old"})  # fmt: skip
    out, ops, _ = apply(n, Decision(labels={f"{FNS}/a": "1"}))
    assert ops == [
        {"op": "remove", "path": f"/metadata/labels/{escape(FNS + '/old')}"},
        {"op": "add", "path": f"/metadata/annotations/{escape(LABELS_ANN)}", "value": "a"},
    ]
    assert out["metadata"]["labels"][f"{FNS}/other"] == "1"


def test_missing_maps_are_created():
    n = {"metadata": {"name": "n1"}, "status": {}}
    d = Decision(labels={f"{FNS}/a": "1"}, extended_resources={f"{FNS}/r": "2"})
    out, _, _ = apply(n, d)
    assert out["metadata"]["labels"] == {f"{FNS}/a": "1"}
    assert out["status"]["capacity"] == out["status"]["allocatable"] == {f"{FNS}/r": "2"}


def test_extended_resources_in_capacity_and_allocatable_and_removed_when_stale():
    out, _, sops = apply(node(capacity={"cpu": "2"}), Decision(extended_resources={"vendor.io/a~b": "3"}))
    assert {o["path"] for o in sops} == {
        "/status/capacity/vendor.io~1a~0b",
        "/status/allocatable/vendor.io~1a~0b",
    }
    assert out["status"]["capacity"] == {"cpu": "2", "vendor.io/a~b": "3"}
    assert out["metadata"]["annotations"][ER_ANN] == "vendor.io/a~b"
    out, _, _ = apply(out, Decision())
    assert out["status"]["capacity"] == {"cpu": "2"} and out["status"]["allocatable"] == {"cpu": "2"}


def test_equal_quantities_in_another_spelling_are_not_rewritten():
    d = Decision(extended_resources={f"{FNS}/mem": "1024Mi"})
    out, _, _ = apply(node(), d)
    out["status"]["capacity"][f"{FNS}/mem"] = "1Gi"
    out["status"]["allocatable"][f"{FNS}/mem"] = "1Gi"
    _, _, sops = apply(out, d)
    assert sops == []


def test_device_plugin_resources_never_patched():
    n = node(capacity={"nvidia.com/gpu": "8"}, annotations={ER_ANN: "nvidia.com/gpu"})
    _, ops, sops = apply(n, Decision(), dpr=("nvidia.com/gpu",))
    assert sops == []
    assert all("capacity" not in o["path"] for o in ops)


def test_recreated_node_gets_resources_again():
    d = Decision(extended_resources={f"{FNS}/r": "1"})
    out, _, _ = apply(node(), d)
    out["status"]["capacity"].clear()  # kubelet re-created the Node
    out["status"]["allocatable"].clear()
    out, _, sops = apply(out, d)
    assert len(sops) == 2 and out["status"]["capacity"] == {f"{FNS}/r": "1"}


@pytest.mark.parametrize("existing", [None, [{"key": "other", "effect": "NoSchedule"}]])
def test_taints_keep_others_and_replace_ours(existing):
    t = Taint(f"{FNS}/special", "true", "NoSchedule")
    out, _, _ = apply(node(taints=existing), Decision(taints=(t,)))
    got = out["spec"]["taints"]
    assert {"key": f"{FNS}/special", "value": "true", "effect": "NoSchedule"} in got
    assert ({"key": "other", "effect": "NoSchedule"} in got) == bool(existing)
    assert out["metadata"]["annotations"][TAINTS_ANN] == f"{FNS}/special=true:NoSchedule"
    out, _, _ = apply(out, Decision())
    assert out["spec"]["taints"] == (existing or [])
    assert TAINTS_ANN not in out["metadata"]["annotations"]


def test_tracking_annotations_read_from_many_nodes_are_one_string():
    # Each answer is parsed afresh; a fleet's equal tracking annotations (a name per
    # label: kilobytes) must not be held once per node.
    value = ",".join(f"label-{i}" for i in range(200))

    def node() -> dict:
        return json.loads(json.dumps({"metadata": {"labels": {}, "annotations": {LABELS_ANN: value}}}))

    a, b = observe(node()), observe(node())
    assert a.annotations[LABELS_ANN] == value
    assert a.annotations[LABELS_ANN] is b.annotations[LABELS_ANN]


def test_nodes_in_sync_with_one_decision_share_what_is_observed():
    d = Decision(labels={f"{FNS}/a": "1"}, extended_resources={f"{FNS}/r": "2"})
    synced, _, _ = apply(node(labels={"kubernetes.io/hostname": "n1"}), d)
    a, b = (observe(json.loads(json.dumps(synced)), d) for _ in range(2))
    assert (a.labels, a.annotations, a.capacity) == (b.labels, b.annotations, b.capacity)
    assert a.labels is b.labels and a.annotations is b.annotations
    assert not node_patch(d, b) and not status_patch(d, b)
    bare = observe(node(), None), observe(node(), None)
    assert bare[0].capacity is bare[1].capacity and bare[0].taints is bare[1].taints


def test_a_merge_patch_only_for_what_it_can_say():
    labels = [{"op": "add", "path": "/metadata/labels/a~1b", "value": "1"}]
    assert merge_patch(labels) == {"metadata": {"labels": {"a/b": "1"}}}
    assert merge_patch([{"op": "remove", "path": "/status/capacity/x~0y"}]) == {
        "status": {"capacity": {"x~y": None}}
    }
    taints = [{"op": "add", "path": "/spec/taints", "value": []}]
    assert merge_patch(taints) == {"spec": {"taints": []}}
    # A test, a replace of a whole map, a list element: JSON Patch only.
    for op in (
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/labels", "value": {"a": "1"}},
        {"op": "add", "path": "/spec/taints/0", "value": {"key": "k", "effect": "NoSchedule"}},
        {"op": "replace", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/name", "value": "x"},
    ):
        assert merge_patch([*labels, op]) is None, op
