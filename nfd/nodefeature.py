"""Upstream's NodeFeature objects (``nfd.k8s-sigs.io/v1alpha1``, namespaced): reading
one, merging a node's several as upstream's master does, and building the one a worker
writes. Pure: no Kubernetes client here, so the worker's default path and ``nfd rules
test`` can use it.

Upstream's master merges the objects labelled with a node's name in this order: those
in its own namespace first, then by name, then by namespace. Each later object's
features are merged into the earlier ones (flag and attribute elements added or
replaced, instances appended) and its ``spec.labels`` replace labels of the same name;
unprefixed label names stand for ``feature.node.kubernetes.io/<name>``. Rule labels
override all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nfd.features import Features, NullAttributes, NullFlags
from nfd.policy import qualified_labels

GROUP = "nfd.k8s-sigs.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "NodeFeature"
PLURAL = "nodefeatures"
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
WORKER_VERSION_ANNOTATION = "nfd.node.kubernetes.io/worker.version"
FEATURE_NS = "feature.node.kubernetes.io"


class NodeFeatureError(ValueError):
    """An object that is not a usable NodeFeature; the message says where."""


@dataclass(frozen=True)
class NodeFeatureObject:
    """What the master needs of one object."""

    namespace: str
    name: str
    node: str
    features: Features
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse(obj: Any) -> NodeFeatureObject:
    """One object as from YAML or the API server. Raises NodeFeatureError."""
    if not isinstance(obj, Mapping):
        raise NodeFeatureError("not an object")
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise NodeFeatureError("metadata: expected an object")
    labels = meta.get("labels") or {}
    node = labels.get(NODE_NAME_LABEL, "") if isinstance(labels, Mapping) else ""
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise NodeFeatureError("spec: expected an object")
    try:
        features = Features.from_dict(spec.get("features") or {})
    except ValueError as e:
        raise NodeFeatureError(f"spec.{e}") from None
    raw_labels = spec.get("labels") or {}
    if not isinstance(raw_labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw_labels.items()
    ):
        raise NodeFeatureError("spec.labels: expected an object of strings")
    return NodeFeatureObject(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        node=str(node),
        features=features,
        labels=dict(raw_labels),
    )


def qualify(name: str) -> str:
    return name if "/" in name else f"{FEATURE_NS}/{name}"


def merge_order(objs: Iterable[NodeFeatureObject], own_namespace: str) -> list[NodeFeatureObject]:
    """Upstream's order: the master's own namespace first, then name, then namespace."""
    return sorted(objs, key=lambda o: (o.namespace != own_namespace, o.name, o.namespace))


def merge_features_into(out: Features, other: Features) -> None:
    """Upstream's Features.MergeInto: ``other`` wins element by element."""
    for name, flags in other.flags.items():
        cur = out.flags.get(name)
        if cur is None or isinstance(cur, NullFlags):
            out.flags[name] = NullFlags() if isinstance(flags, NullFlags) else set(flags)
        else:
            cur |= flags
    for name, attrs in other.attributes.items():
        cur_a = out.attributes.get(name)
        if cur_a is None or isinstance(cur_a, NullAttributes):
            out.attributes[name] = NullAttributes() if isinstance(attrs, NullAttributes) else dict(attrs)
        else:
            cur_a.update(attrs)
    for name, insts in other.instances.items():
        out.instances.setdefault(name, []).extend(dict(i) for i in insts)


@dataclass
class Merged:
    """A node's objects merged: features, and labels (qualified) with the object each
    came from."""

    features: Features
    labels: dict[str, str]
    origins: dict[str, str]


def merge(objs: Iterable[NodeFeatureObject], own_namespace: str, base: Features | None = None) -> Merged:
    """``base``: features to merge onto first (the node's own worker's, which upstream
    would find in the first object)."""
    features = Features()
    if base is not None:
        merge_features_into(features, base)
    labels: dict[str, str] = {}
    origins: dict[str, str] = {}
    for o in merge_order(objs, own_namespace):
        merge_features_into(features, o.features)
        for q, v in qualified_labels(o.labels).items():
            labels[q] = v
            origins[q] = f"{KIND} {o.ref}"
    return Merged(features, labels, origins)


def for_worker(
    *,
    node: str,
    namespace: str,
    features: Features,
    labels: Mapping[str, str] = {},
    pod_name: str = "",
    pod_uid: str = "",
) -> dict[str, Any]:
    """The object upstream's nfd-worker writes for its node: named after the node, in
    the worker's namespace, labelled with the node name, owned by the worker's pod (so
    it goes when the pod does)."""
    from nfd import __version__

    meta: dict[str, Any] = {
        "name": node,
        "namespace": namespace,
        "annotations": {WORKER_VERSION_ANNOTATION: __version__},
        "labels": {NODE_NAME_LABEL: node},
    }
    if pod_name and pod_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid}]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": meta,
        "spec": {"features": features.to_dict(), "labels": dict(sorted(labels.items()))},
    }


def worker_object_from_env(
    *, features: Features, labels: Mapping[str, str], env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``for_worker`` with the node and pod as a DaemonSet's downward API gives them:
    NODE_NAME (else the host name), POD_NAMESPACE (else node-feature-discovery),
    POD_NAME and POD_UID (the owner; none when either is missing)."""
    import os
    import socket

    e = os.environ if env is None else env
    return for_worker(
        node=e.get("NODE_NAME") or socket.gethostname(),
        namespace=e.get("POD_NAMESPACE") or "node-feature-discovery",
        features=features,
        labels=labels,
        pod_name=e.get("POD_NAME", ""),
        pod_uid=e.get("POD_UID", ""),
    )
