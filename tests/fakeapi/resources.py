"""The resource types the fake serves and what the API server checks on each."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .errors import ApiError, invalid
from .nrt import nrt_causes

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# (new object, stored object or None): raises ApiError(422). Parts equal to the stored
# object's passed validation before, so validators may skip them.
Validator = Callable[[dict[str, Any], dict[str, Any] | None], None]


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    custom: bool = False  # a custom resource: no strategic merge, list items keep kind
    field_selectors: frozenset[str] = frozenset({"metadata.name"})
    # Whether writes to the status subresource leave metadata (labels, annotations, ...)
    # as stored. Nodes are the exception: their status strategy resets only spec.
    status_keeps_meta: bool = True
    validate: Validator | None = field(default=None, compare=False)
    # Rewrites fields into the form the API server stores them in (time formats).
    normalize: Callable[[dict[str, Any]], None] | None = field(default=None, compare=False)
    # The write strategy that depends on the server's feature gates (name -> enabled):
    # drops the fields of a disabled feature, defaults others, as the API server does.
    gated: Callable[[dict[str, Any], Mapping[str, bool]], None] | None = field(default=None, compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """``nodes``, ``leases.coordination.k8s.io``: the name the request log uses."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def patch_types(self) -> list[str]:
        if self.custom:
            return [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
        return [JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH]


_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?$")


@functools.lru_cache(maxsize=65536)
def _qualified_name_error(key: str) -> str | None:
    prefix, sep, name = key.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not all(_DNS_LABEL.match(p) for p in prefix.split("."))):
        return "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME.match(name):
        return "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
    return None


@functools.lru_cache(maxsize=4096)
def _is_quantity(text: str) -> bool:
    return _QUANTITY.match(text) is not None


_SUFFIX = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}  # fmt: skip


def _is_whole_quantity(text: str) -> bool:
    """Whether a quantity is a whole number ("2", "1k"; not "500m" or "1.5")."""
    m = re.fullmatch(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([KMGTPE]i|[numkMGTPE]?)|[eE]([+-]?\d+))", text)
    if not m:
        return False
    number = Decimal(m.group(1))
    value = number * Decimal(10) ** int(m.group(3)) if m.group(3) else number * _SUFFIX[m.group(2) or ""]
    return value == value.to_integral_value()


def _label_value_error(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    return _label_string_error(value)


@functools.lru_cache(maxsize=65536)
def _label_string_error(value: str) -> str | None:
    if value == "":
        return None
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _NAME.match(value):
        return "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
    return None


def _meta_causes(obj: dict[str, Any], old: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    meta = obj.get("metadata") or {}
    old_meta = (old or {}).get("metadata") or {}
    causes: list[tuple[str, str, str]] = []
    old_labels = old_meta.get("labels") or {}
    for key, value in (meta.get("labels") or {}).items():
        if key in old_labels and old_labels[key] == value:
            continue
        err = _qualified_name_error(key)
        if err:
            causes.append(("metadata.labels", key, err))
        err = _label_value_error(value)
        if err:
            causes.append(("metadata.labels", str(value), err))
    annotations = meta.get("annotations") or {}
    old_annotations = old_meta.get("annotations") or {}
    size = 0
    for key, value in annotations.items():
        size += len(key) + len(str(value))
        if key in old_annotations and old_annotations[key] == value:
            continue
        err = _qualified_name_error(key)
        if err:
            causes.append(("metadata.annotations", key, err))
        if not isinstance(value, str):
            causes.append(("metadata.annotations", str(value), "must be a string"))
    if size > 256 * 1024:
        causes.append(("metadata.annotations", "", "Too long: must have at most 262144 bytes"))
    return causes


def _validate_meta(kind: str, group: str) -> Validator:
    def check(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        causes = _meta_causes(obj, old)
        if causes:
            raise invalid(kind, group, obj["metadata"]["name"], causes)

    return check


def _validate_node(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = _meta_causes(obj, old)
    status = obj.get("status") or {}
    old_status = (old or {}).get("status") or {}
    for part in ("capacity", "allocatable"):
        old_part = old_status.get(part) or {}
        for name, value in (status.get(part) or {}).items():
            if name in old_part and old_part[name] == value:
                continue
            err = _qualified_name_error(name)
            if err:
                causes.append((f"status.{part}", name, err))
            if not isinstance(value, str | int) or not _is_quantity(str(value)):
                causes.append(
                    (
                        f"status.{part}[{name}]",
                        str(value),
                        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                    )
                )
            elif "/" in name and not _is_whole_quantity(str(value)):
                # Extended resources (names with a domain) must be whole numbers.
                causes.append((f"status.{part}[{name}]", str(value), "must be an integer"))
    for i, taint in enumerate((obj.get("spec") or {}).get("taints") or []):
        if taint.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            causes.append(
                (
                    f"spec.taints[{i}].effect",
                    str(taint.get("effect")),
                    'supported values: "NoExecute", "NoSchedule", "PreferNoSchedule"',
                )
            )
        err = _qualified_name_error(str(taint.get("key", "")))
        if err:
            causes.append((f"spec.taints[{i}].key", str(taint.get("key")), err))
    if causes:
        raise invalid("Node", "", obj["metadata"]["name"], causes)


def _validate_lease(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = _meta_causes(obj, old)
    spec = obj.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        causes.append(("spec.leaseDurationSeconds", str(duration), "must be greater than 0"))
    if causes:
        raise invalid("Lease", "coordination.k8s.io", obj["metadata"]["name"], causes)


def _micro_time(value: Any, field_path: str) -> str:
    """A MicroTime as the API server writes it: UTC, microseconds, ``Z``."""
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(
            400, f'{field_path}: parsing time "{value}" as RFC3339 with microseconds failed'
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _normalize_lease(obj: dict[str, Any]) -> None:
    spec = obj.get("spec") or {}
    for key in ("acquireTime", "renewTime"):
        if spec.get(key):
            spec[key] = _micro_time(spec[key], f"spec.{key}")


def _validate_nrt(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = _meta_causes(obj, old) + nrt_causes(obj)
    if causes:
        raise invalid("NodeResourceTopology", "topology.node.k8s.io", obj["metadata"]["name"], causes)


_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
MAX_CONFIG_BYTES = 1024 * 1024


def _config_data_causes(obj: dict[str, Any], fields: dict[str, bool]) -> list[tuple[str, str, str]]:
    """Secret and ConfigMap data (``fields``: name -> base64-encoded): keys as the API
    server allows them, 1 MiB in all."""
    import base64
    import binascii

    causes: list[tuple[str, str, str]] = []
    size = 0
    for f, encoded in fields.items():
        for k, v in (obj.get(f) or {}).items():
            if not _CONFIG_KEY.match(k) or len(k) > 253 or k in (".", ".."):
                causes.append(
                    (
                        f"{f}[{k}]",
                        k,
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                    )
                )
            if not isinstance(v, str):
                raise ApiError(400, f"{f}[{k}]: expected a string")
            if not encoded:
                size += len(v.encode())
                continue
            try:
                size += len(base64.b64decode(v, validate=True))
            except (binascii.Error, ValueError):
                raise ApiError(400, f"{f}[{k}]: illegal base64 data") from None
    if size > MAX_CONFIG_BYTES:
        causes.append(("data", "", f"Too long: must have at most {MAX_CONFIG_BYTES} bytes"))
    return causes


def _validate_secret(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = _meta_causes(obj, old) + _config_data_causes(obj, {"data": True})
    kind = obj.get("type") or "Opaque"
    if old is not None and kind != (old.get("type") or "Opaque"):
        causes.append(("type", kind, "field is immutable"))
    if kind == "kubernetes.io/tls":
        for k in ("tls.crt", "tls.key"):
            if k not in (obj.get("data") or {}):
                causes.append((f"data[{k}]", "", "Required value"))
    if causes:
        raise invalid("Secret", "", obj["metadata"]["name"], causes)


def _normalize_secret(obj: dict[str, Any]) -> None:
    """``stringData`` is write-only: the API server merges it into ``data``."""
    import base64

    extra = obj.pop("stringData", None) or {}
    if extra:
        data = dict(obj.get("data") or {})
        data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in extra.items()})
        obj["data"] = data
    obj.setdefault("type", "Opaque")


def _validate_configmap(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = _meta_causes(obj, old) + _config_data_causes(obj, {"data": False, "binaryData": True})
    both = set(obj.get("data") or {}) & set(obj.get("binaryData") or {})
    causes += [(f"data[{k}]", k, "duplicate of key present in binaryData") for k in sorted(both)]
    if causes:
        raise invalid("ConfigMap", "", obj["metadata"]["name"], causes)


NFD_GROUP = "nfd.k8s-sigs.io"

NODES = ResourceType(
    "",
    "v1",
    "nodes",
    "Node",
    namespaced=False,
    subresources=frozenset({"status"}),
    field_selectors=frozenset({"metadata.name", "spec.unschedulable"}),
    status_keeps_meta=False,
    validate=_validate_node,
)
PODS = ResourceType(
    "",
    "v1",
    "pods",
    "Pod",
    namespaced=True,
    subresources=frozenset({"status"}),
    field_selectors=frozenset(
        {"metadata.name", "metadata.namespace", "spec.nodeName", "spec.serviceAccountName", "status.phase"}
    ),
    validate=_validate_meta("Pod", ""),
)
SECRETS = ResourceType(
    "",
    "v1",
    "secrets",
    "Secret",
    namespaced=True,
    field_selectors=frozenset({"metadata.name", "metadata.namespace", "type"}),
    validate=_validate_secret,
    normalize=_normalize_secret,
)
CONFIGMAPS = ResourceType(
    "",
    "v1",
    "configmaps",
    "ConfigMap",
    namespaced=True,
    field_selectors=frozenset({"metadata.name", "metadata.namespace"}),
    validate=_validate_configmap,
)
LEASES = ResourceType(
    "coordination.k8s.io",
    "v1",
    "leases",
    "Lease",
    namespaced=True,
    field_selectors=frozenset({"metadata.name", "metadata.namespace"}),
    validate=_validate_lease,
    normalize=_normalize_lease,
)


def _validate_event(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = _meta_causes(obj, old)
    involved = obj.get("involvedObject") or {}
    namespace = obj["metadata"].get("namespace", "")
    # A cluster-scoped object's events live in "default" (kubelet files a Node's there).
    if not involved.get("namespace") and namespace != "default":
        causes.append(("involvedObject.namespace", "", "does not match event.namespace"))
    elif involved.get("namespace") and involved["namespace"] != namespace:
        causes.append(("involvedObject.namespace", involved["namespace"], "does not match event.namespace"))
    if obj.get("type") not in (None, "Normal", "Warning"):
        causes.append(("type", str(obj.get("type")), 'supported values: "Normal", "Warning"'))
    if len(str(obj.get("reason") or "")) > 128:
        causes.append(("reason", "", "must be no more than 128 characters"))
    if causes:
        raise invalid("Event", "", obj["metadata"]["name"], causes)


EVENTS = ResourceType(
    "",
    "v1",
    "events",
    "Event",
    namespaced=True,
    field_selectors=frozenset(
        {
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.name",
            "reason",
            "type",
        }
    ),
    validate=_validate_event,
)
NODE_FEATURE_RULES = ResourceType(
    NFD_GROUP,
    "v1alpha1",
    "nodefeaturerules",
    "NodeFeatureRule",
    namespaced=False,
    custom=True,
    validate=_validate_meta("NodeFeatureRule", NFD_GROUP),
)
NODE_FEATURES = ResourceType(
    NFD_GROUP,
    "v1alpha1",
    "nodefeatures",
    "NodeFeature",
    namespaced=True,
    custom=True,
    field_selectors=frozenset({"metadata.name", "metadata.namespace"}),
    validate=_validate_meta("NodeFeature", NFD_GROUP),
)
NODE_FEATURE_GROUPS = ResourceType(
    NFD_GROUP,
    "v1alpha1",
    "nodefeaturegroups",
    "NodeFeatureGroup",
    namespaced=True,
    custom=True,
    subresources=frozenset({"status"}),
    field_selectors=frozenset({"metadata.name", "metadata.namespace"}),
    validate=_validate_meta("NodeFeatureGroup", NFD_GROUP),
)

NODE_RESOURCE_TOPOLOGIES = ResourceType(
    "topology.node.k8s.io",
    "v1alpha2",
    "noderesourcetopologies",
    "NodeResourceTopology",
    namespaced=False,
    custom=True,
    validate=_validate_nrt,
)

from .resource_dra import DRA_TYPES  # noqa: E402  (it builds on the helpers above)

ALL_TYPES = (
    NODES, PODS, SECRETS, CONFIGMAPS, LEASES, EVENTS, NODE_FEATURE_RULES, NODE_FEATURES, NODE_FEATURE_GROUPS, NODE_RESOURCE_TOPOLOGIES,
    *DRA_TYPES,
)  # fmt: skip
BY_PATH: dict[tuple[str, str, str], ResourceType] = {(t.group, t.version, t.plural): t for t in ALL_TYPES}


def check_name(rt: ResourceType, name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise ApiError(
            422,
            f'{rt.kind}.{rt.api_version} "" is invalid: metadata.name: Required value: name or generateName is required',
        )
    if len(name) > 253 or not all(_DNS_LABEL.match(p) for p in name.split(".")):
        raise invalid(
            rt.kind,
            rt.group,
            name,
            [
                (
                    "metadata.name",
                    name,
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                )
            ],
        )
