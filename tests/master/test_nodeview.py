"""``nodeview``: a Node parsed for what the master reads of it gives the master the
same view (``observe``, ``prune.plan``, the watch's name and resourceVersion) as the
Node parsed whole, and what does not fit is parsed whole."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nfd.decision import Decision
from nfd.master.core import nodeview
from nfd.master.publishing.patches import observe
from nfd.master.publishing.prune import plan
from nfd.policy import FEATURE_NS, NFD_NS
from nfd.taint import Taint

LABELS = {f"{FEATURE_NS}/cpu-cpuid.F{i}": "true" for i in range(50)}
ER = f"{FEATURE_NS}/gpu"


def full_node(**changes: Any) -> dict[str, Any]:
    """A Node as the API server answers a write: nfd's labels, annotations, taint and
    extended resource, and the parts nfd never reads."""
    n: dict[str, Any] = {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": "n1",
            "uid": "u-1",
            "resourceVersion": "1234",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"kubernetes.io/hostname": "n1", **LABELS},
            "annotations": {
                f"{NFD_NS}/feature-labels": ",".join(sorted(k.split("/", 1)[1] for k in LABELS)),
                f"{NFD_NS}/extended-resources": "gpu",
                f"{NFD_NS}/taints": "example.com/t=v:NoSchedule",
                f"{NFD_NS}/worker.version": "v1",
                "node.alpha.kubernetes.io/ttl": "0",
            },
            "managedFields": [
                {
                    "manager": "nfd-master",
                    "operation": "Update",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in LABELS}}},
                }
            ],
        },
        "spec": {
            "podCIDR": "10.0.0.0/24",
            "taints": [
                {"key": "example.com/t", "value": "v", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "x"},
            ],
        },
        "status": {
            "capacity": {"cpu": "2", ER: "4", "pods": 110},
            "allocatable": {"cpu": "2", ER: "4"},
            "conditions": [{"type": "Ready", "status": "Unknown"}],
            "images": [{"names": ["registry/image:tag"], "sizeBytes": 12345}],
            "nodeInfo": {"kubeletVersion": "v1.36.2"},
        },
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = n
        for p in parents:
            target = target[p]
        if value is _DROP:
            target.pop(last, None)
        else:
            target[last] = value
    return n


_DROP = object()
DECISIONS = [
    None,
    Decision(),
    Decision(
        labels=dict(LABELS), extended_resources={ER: "4"}, taints=(Taint("example.com/t", "v", "NoSchedule"),)
    ),
    Decision(labels={f"{FEATURE_NS}/other": "1"}),
]
VARIANTS = [
    {},
    {"metadata__labels": _DROP, "metadata__annotations": _DROP},
    {"metadata__labels": None, "spec__taints": None},
    {"status__capacity": _DROP, "status__allocatable": _DROP},
    {"spec": _DROP, "status": _DROP},
    {"spec__unschedulable": True},
]
MISFITS = [{"metadata": None}, {"status": []}, {"spec": []}]  # parsed whole


@pytest.mark.parametrize("changes", VARIANTS + MISFITS)
def test_the_view_reads_as_the_whole_node(changes):
    raw = json.dumps(full_node(**changes)).encode()
    whole, view = json.loads(raw), nodeview.node(raw)
    for d in DECISIONS:
        assert observe(view, d) == observe(whole, d)
    if isinstance(whole.get("metadata"), dict):
        assert plan(view) == plan(whole)
        assert view["metadata"].get("name") == whole["metadata"].get("name")
    if changes in MISFITS:
        assert view == whole
    else:
        assert "managedFields" not in view["metadata"] and "images" not in view.get("status", {})


def test_the_unread_parts_are_left_out():
    view = nodeview.node(json.dumps(full_node()).encode())
    assert "managedFields" not in view["metadata"]
    assert set(view["status"]) == {"capacity", "allocatable"}
    assert view["metadata"]["resourceVersion"] == "1234"
    assert view["status"]["capacity"]["pods"] == 110  # values as they came, never converted


@pytest.mark.parametrize("kind", ["ADDED", "MODIFIED", "DELETED"])
def test_watch_events_of_nodes_are_viewed(kind):
    line = json.dumps({"type": kind, "object": full_node()})
    ev = nodeview.event(line)
    assert ev["type"] == kind
    assert observe(ev["object"], DECISIONS[2]) == observe(json.loads(line)["object"], DECISIONS[2])
    assert "managedFields" not in ev["object"]["metadata"]


def test_bookmarks_and_errors_keep_what_the_watch_loop_reads():
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Node", "metadata": {"resourceVersion": "99"}}}
    assert nodeview.event(json.dumps(bookmark)) == bookmark
    error = {
        "type": "ERROR",
        "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"},
    }
    assert nodeview.event(json.dumps(error)) == error
    odd = {"type": "MODIFIED", "object": None}
    assert nodeview.event(json.dumps(odd)) == odd
    with pytest.raises(ValueError):
        nodeview.event("{not json")


def test_a_list_page_of_nodes_reads_as_the_whole_page():
    doc = {
        "kind": "NodeList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "77", "continue": "tok", "remainingItemCount": 3},
        "items": [full_node(**changes) for changes in VARIANTS],
    }
    raw = json.dumps(doc).encode()
    whole, view = json.loads(raw), nodeview.page(raw)
    assert view["metadata"] == {"resourceVersion": "77", "continue": "tok"}
    assert len(view["items"]) == len(whole["items"])
    for v, w in zip(view["items"], whole["items"], strict=True):
        assert plan(v) == plan(w) and v["metadata"].get("name") == w["metadata"]["name"]
        for d in DECISIONS:
            assert observe(v, d) == observe(w, d)
        assert "managedFields" not in v["metadata"]


@pytest.mark.parametrize("doc", [{"metadata": {}, "items": None}, {"items": [full_node(metadata=None)]}])
def test_a_list_page_that_does_not_fit_is_parsed_whole(doc):
    assert nodeview.page(json.dumps(doc)) == doc
