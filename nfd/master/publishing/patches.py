"""Pure: a Node (as JSON) + a Decision -> the JSON Patches that bring the Node there,
touching only what the master owns (named in its tracking annotations, as upstream)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from nfd.decision import Decision
from nfd.master.core.state import (
    HAS_ALLOCATABLE,
    HAS_ANNOTATIONS,
    HAS_CAPACITY,
    HAS_LABELS,
    HAS_TAINTS,
    Observed,
    shared,
)
from nfd.policy import FEATURE_NS, NFD_NS, parse_quantity
from nfd.taint import Taint

LABELS_ANN = f"{NFD_NS}/feature-labels"
ER_ANN = f"{NFD_NS}/extended-resources"
TAINTS_ANN = f"{NFD_NS}/taints"
ANNOTATIONS_ANN = f"{NFD_NS}/feature-annotations"
TRACKING = (LABELS_ANN, ER_ANN, TAINTS_ANN, ANNOTATIONS_ANN)

Op = dict[str, Any]


def escape(key: str) -> str:
    """RFC 6901: ``~`` -> ``~0``, ``/`` -> ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


# The Node's maps whose members the patches above add and remove, and its list they
# replace whole.
_MAPS = ("/metadata/labels", "/metadata/annotations", "/status/capacity", "/status/allocatable")
_WHOLE = ("/spec/taints",)


def merge_patch(ops: list[Op]) -> dict[str, Any] | None:
    """The JSON Merge Patch (RFC 7386) that does what ``ops`` do, or None when they are
    more than adds and removes of the members of a Node's maps and the replacement of
    its taints. The API server applies one merge patch for a tenth less CPU than a JSON
    Patch of as many ops as labels (docs/perf.md); and where a JSON Patch adds an empty
    map only where none was, the merge patch leaves a map that is there as it is."""
    out: dict[str, Any] = {}
    parent, target = "", out
    for op in ops:
        path, kind = op["path"], op["op"]
        member = _member(path)
        if member is None:
            if kind == "add" and (path in _WHOLE or (path in _MAPS and op["value"] == {})):
                _within(out, path, op["value"] if path in _WHOLE else None)
                continue
            return None
        if member[0] != parent:  # the ops come grouped by map
            parent = member[0]
            target = _within(out, parent)
        if kind == "add":
            target[member[1]] = op["value"]
        elif kind == "remove":
            target[member[1]] = None
        else:
            return None
    return out


@functools.lru_cache(maxsize=4096)  # a fleet's nodes carry the same few hundred names
def _member(path: str) -> tuple[str, str] | None:
    """(the map's path, the member's name) of a path into one of ``_MAPS``."""
    parent, _, key = path.rpartition("/")
    return (parent, key.replace("~1", "/").replace("~0", "~")) if parent in _MAPS else None


def _within(doc: dict[str, Any], path: str, value: Any = None) -> Any:
    """The map at ``path`` in ``doc``, made where missing; ``value``: set there instead."""
    *parents, last = path.split("/")[1:]
    for part in parents:
        doc = doc.setdefault(part, {})
    if value is not None:
        doc[last] = value
        return value
    return doc.setdefault(last, {})


def _strip(name: str) -> str:
    # Names in the default namespace are tracked without it, as upstream does.
    prefix = FEATURE_NS + "/"
    return name[len(prefix) :] if name.startswith(prefix) else name


def _qualify(name: str) -> str:
    return name if "/" in name else f"{FEATURE_NS}/{name}"


def parse_names(value: str | None) -> frozenset[str]:
    return _parse_names(value or "")


@functools.lru_cache(maxsize=4096)  # a fleet's nodes carry few distinct annotation values
def _parse_names(value: str) -> frozenset[str]:
    return frozenset(_qualify(n.strip()) for n in value.split(",") if n.strip())


def tracking_value(names: Iterable[str]) -> str:
    return ",".join(sorted(_strip(n) for n in names))


def _tracking(decision: Decision) -> tuple[str, str, str]:
    """(labels, annotations, taints) tracking values; computed once per decision (shared
    by every node that has it)."""
    cached = decision.__dict__.get("_tracking")
    if cached is None:
        cached = (
            tracking_value(decision.labels),
            tracking_value(decision.annotations),
            ",".join(sorted(str(t) for t in decision.taints)),
        )
        decision.__dict__["_tracking"] = cached  # frozen dataclass: a cache, not state
    return cached


def _label_ops(decision: Decision) -> list[tuple[str, str, Op]]:
    """(name, value, the op that sets it) of each label; built once per decision and
    shared by every node that has it: a new node's patch is mostly these, and the 64
    writes in flight would each hold ~180 dicts of their own (docs/perf.md)."""
    cached = decision.__dict__.get("_label_ops")
    if cached is None:
        cached = [
            (k, v, {"op": "add", "path": f"/metadata/labels/{escape(k)}", "value": v})
            for k, v in decision.labels.items()
        ]
        decision.__dict__["_label_ops"] = cached  # frozen dataclass: a cache, not state
    return cached


def owned(obs: Observed) -> tuple[frozenset[str], frozenset[str], frozenset[str], set[str]]:
    """(labels, annotations, extended resources, taints as ``key=value:effect``)."""
    a = obs.annotations
    taints = {t.strip() for t in (a.get(TAINTS_ANN) or "").split(",") if t.strip()}
    return (
        parse_names(a.get(LABELS_ANN)),
        parse_names(a.get(ANNOTATIONS_ANN)),
        parse_names(a.get(ER_ANN)),
        taints,
    )


# Observed is never changed once built, so nodes share equal parts: these, and the
# decision's own maps (a node in sync holds what its decision wants).
_NO_VALUES: dict[str, str] = {}
_NO_TAINTS: list[dict[str, str]] = []


def _shared_annotations(decision: Decision | None, ours: dict[str, str]) -> dict[str, str]:
    """``ours``, or an equal map another node of ``decision`` holds already."""
    if not ours:
        return _NO_VALUES
    if decision is None:
        return ours
    known = decision.__dict__.get("_observed_annotations")
    if known == ours:
        return known  # type: ignore[no-any-return]
    decision.__dict__["_observed_annotations"] = ours  # frozen dataclass: a cache, not state
    return ours


def _version(rv: Any) -> int | str:
    """A resourceVersion as kept: opaque, but the API server's are integers, and an int
    is 28 B a node where its string is 54 B."""
    s = str(rv or "")
    return int(s) if s.isdigit() and len(s) < 19 else s


def observe(node: Mapping[str, Any], decision: Decision | None = None) -> Observed:
    """Keep from a Node what the patches need: memory stays flat however big the Node."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels")
    annotations = meta.get("annotations")
    status = node.get("status") or {}
    capacity = status.get("capacity")
    allocatable = status.get("allocatable")
    spec = node.get("spec") or {}
    taints = spec.get("taints")
    ann_all: dict[str, str] = annotations or {}
    # A tracking annotation names each label of the node (kilobytes): one copy a fleet.
    ours = {k: shared(ann_all[k]) for k in TRACKING if k in ann_all}
    probe = Observed({}, ours, {}, {}, [])
    own_labels, own_ann, own_er, _ = owned(probe)
    want_labels = set(decision.labels) if decision else set()
    want_ann = set(decision.annotations) if decision else set()
    want_er = set(decision.extended_resources) if decision else set()
    lab: dict[str, str] = labels or {}
    keep_l = own_labels | want_labels
    obs_labels = {k: v for k, v in lab.items() if k in keep_l}
    if decision is not None and obs_labels == decision.labels:
        obs_labels = decision.labels  # share: a synced fleet costs one copy
    elif not obs_labels:
        obs_labels = _NO_VALUES
    keep_a = own_ann | want_ann
    ours.update({k: v for k, v in ann_all.items() if k in keep_a})
    keep_e = own_er | want_er
    cap: dict[str, str] = capacity or {}
    alloc: dict[str, str] = allocatable or {}
    return Observed(
        labels=obs_labels,
        annotations=_shared_annotations(decision, ours),
        capacity={k: str(v) for k, v in cap.items() if k in keep_e} if keep_e and cap else _NO_VALUES,
        allocatable={k: str(v) for k, v in alloc.items() if k in keep_e} if keep_e and alloc else _NO_VALUES,
        taints=list(taints) if taints else _NO_TAINTS,
        present=(HAS_LABELS if labels is not None else 0)
        | (HAS_ANNOTATIONS if annotations is not None else 0)
        | (HAS_CAPACITY if capacity is not None else 0)
        | (HAS_ALLOCATABLE if allocatable is not None else 0)
        | (HAS_TAINTS if taints is not None else 0),
        resource_version=_version(meta.get("resourceVersion")),
    )


def _same_quantity(a: str | None, b: str) -> bool:
    if a is None:
        return False
    if a == b:
        return True
    try:  # the API server may canonicalise ("1000m" -> "1")
        return parse_quantity(a) == parse_quantity(b)
    except ValueError:
        return False


def _taint_dict(key: str, value: str, effect: str) -> dict[str, str]:
    d = {"key": key, "effect": effect}
    if value:
        d["value"] = value
    return d


def node_patch(decision: Decision, obs: Observed, *, device_plugin_resources: Iterable[str] = ()) -> list[Op]:
    """One JSON Patch on the Node: labels, feature annotations, the tracking annotations
    and (when they change) taints. Empty when nothing needs to change. The ops may be
    shared with other nodes' patches: read them, never change them."""
    ops: list[Op] = []
    own_l, own_a, own_e, own_t = owned(obs)
    served = set(device_plugin_resources)

    label_ops: list[Op] = []
    for k in sorted(own_l - decision.labels.keys()):
        if k in obs.labels:
            label_ops.append({"op": "remove", "path": f"/metadata/labels/{escape(k)}"})
    label_ops += [op for k, v, op in _label_ops(decision) if obs.labels.get(k) != v]
    if label_ops and not obs.has(HAS_LABELS):
        ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
    ops += label_ops

    want_ann: dict[str, str | None] = {}
    for k in own_a - decision.annotations.keys():
        want_ann[k] = None
    want_ann.update(decision.annotations)
    # Tracking annotations: present only when the master owns something of that kind.
    desired_ers = {k for k in decision.extended_resources if k not in served}
    # Resources a device plugin now serves stay tracked until removed, never touched.
    keep_ers = desired_ers | (own_e & served)
    labels_value, annotations_value, taints_value = _tracking(decision)
    want_ann[LABELS_ANN] = labels_value or None
    want_ann[ANNOTATIONS_ANN] = annotations_value or None
    want_ann[ER_ANN] = tracking_value(keep_ers) or None
    want_ann[TAINTS_ANN] = taints_value or None
    taint_names = taints_value.split(",") if taints_value else []
    ann_ops: list[Op] = []
    for k in sorted(want_ann):
        want, cur = want_ann[k], obs.annotations.get(k)
        if want is None:
            if cur is not None:
                ann_ops.append({"op": "remove", "path": f"/metadata/annotations/{escape(k)}"})
        elif cur != want:
            ann_ops.append({"op": "add", "path": f"/metadata/annotations/{escape(k)}", "value": want})
    if ann_ops and not obs.has(HAS_ANNOTATIONS):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    ops += ann_ops

    # Taints: keep everyone else's, replace ours.
    mine = set(own_t) | set(taint_names)
    others = [
        t
        for t in obs.taints
        if taint_str_dict(t) not in mine and (t.get("key"), t.get("effect")) not in _keys(decision)
    ]
    new_taints = others + [_taint_dict(t.key, t.value, t.effect) for t in decision.taints]
    if _norm(new_taints) != _norm(obs.taints) and (new_taints or obs.has(HAS_TAINTS)):
        ops.append({"op": "add", "path": "/spec/taints", "value": new_taints})
    return ops


def _keys(decision: Decision) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in decision.taints}


def taint_str_dict(t: Mapping[str, Any]) -> str:
    return str(Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", ""))))


def _norm(taints: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    return [(str(t.get("key")), str(t.get("value") or ""), str(t.get("effect"))) for t in taints]


def status_patch(
    decision: Decision, obs: Observed, *, device_plugin_resources: Iterable[str] = ()
) -> list[Op]:
    """One JSON Patch on ``nodes/{name}/status``: extended resources in both capacity
    and allocatable. Names a device plugin serves are never written nor removed."""
    served = set(device_plugin_resources)
    _, _, own_e, _ = owned(obs)
    ops: list[Op] = []
    need_cap = need_alloc = False
    for k in sorted(own_e - decision.extended_resources.keys() - served):
        if k in obs.capacity:
            ops.append({"op": "remove", "path": f"/status/capacity/{escape(k)}"})
        if k in obs.allocatable:
            ops.append({"op": "remove", "path": f"/status/allocatable/{escape(k)}"})
    for k, v in decision.extended_resources.items():
        if k in served:
            continue
        if not _same_quantity(obs.capacity.get(k), v):
            ops.append({"op": "add", "path": f"/status/capacity/{escape(k)}", "value": v})
            need_cap = True
        if not _same_quantity(obs.allocatable.get(k), v):
            ops.append({"op": "add", "path": f"/status/allocatable/{escape(k)}", "value": v})
            need_alloc = True
    head: list[Op] = []
    if need_cap and not obs.has(HAS_CAPACITY):
        head.append({"op": "add", "path": "/status/capacity", "value": {}})
    if need_alloc and not obs.has(HAS_ALLOCATABLE):
        head.append({"op": "add", "path": "/status/allocatable", "value": {}})
    return head + ops
