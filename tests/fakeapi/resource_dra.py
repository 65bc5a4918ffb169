"""resource.k8s.io/v1 (Dynamic Resource Allocation) as the API server validates it:
ResourceSlices, ResourceClaims and DeviceClasses, with the limits of
k8s.io/api/resource/v1 (128 devices per slice, 32 attributes and capacities per device,
attribute values of at most 64 characters, ...), and device taints as the
DRADeviceTaints feature validates them (``feature_gates["DRADeviceTaints"] = False``:
the server drops them on write, as one without the feature does). Partitionable devices
(DRAPartitionableDevices): ``sharedCounters`` (a slice holds counter sets or devices,
never both; at most 8 sets, 32 counters each, DNS-label names) and a device's
``consumesCounters`` (at most 2, one per set), dropped on write with the feature off;
whether a consumed set exists is a pool-wide question the server does not ask:
:func:`pool_counter_problems` asks it as the scheduler does."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from .errors import invalid
from .resources import ResourceType, _is_quantity, _label_value_error, _meta_causes, _qualified_name_error

GROUP = "resource.k8s.io"
MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS = 64
MAX_ATTRS_AND_CAPACITY = 32
MAX_VALUE_LEN = 64
MAX_ID_LEN = 32
MAX_REQUESTS = 32
MAX_SELECTORS = 32
MAX_CEL_LEN = 10 * 1024
MAX_TAINTS = 16
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32  # per counter set, and per device counter consumption
MAX_CONSUMPTIONS = 2  # consumesCounters entries per device
PARTITIONABLE = "DRAPartitionableDevices"
MAX_STATUS_CONDITIONS = 8
MAX_STATUS_DATA = 10 * 1024
MAX_STATUS_IPS = 16
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
DEVICE_TAINTS = "DRADeviceTaints"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-((0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(\+([0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*))?$"
)
Causes = list[tuple[str, str, str]]


def _subdomain_error(value: Any, max_len: int = 253) -> str | None:
    if not isinstance(value, str) or not value:
        return "Required value"
    if len(value) > max_len:
        return f"must be no more than {max_len} characters"
    if not all(_DNS_LABEL.match(p) for p in value.split(".")):
        return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
    return None


def _label_error(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return "Required value"
    if len(value) > 63 or not _DNS_LABEL.match(value):
        return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (at most 63)"
    return None


def _qualified_id_error(name: str) -> str | None:
    domain, sep, ident = name.rpartition("/")
    if sep:
        err = _subdomain_error(domain, 63)
        if err:
            return f"domain: {err}"
    if not _C_IDENT.match(ident) or len(ident) > MAX_ID_LEN:
        return f"a C identifier of at most {MAX_ID_LEN} characters is required"
    return None


def _attribute_causes(path: str, name: str, value: Any) -> Causes:
    err = _qualified_id_error(name)
    if err:
        return [(path, name, err)]
    if not isinstance(value, dict):
        return [(f"{path}[{name}]", str(value), "must be an object")]
    kinds = [k for k in ("int", "bool", "string", "version") if k in value]
    if len(kinds) != 1 or set(value) - {"int", "bool", "string", "version"}:
        return [(f"{path}[{name}]", str(value), "exactly one value must be specified")]
    v = value[kinds[0]]
    if kinds[0] == "int" and (isinstance(v, bool) or not isinstance(v, int)):
        return [(f"{path}[{name}].int", str(v), "must be an integer")]
    if kinds[0] == "bool" and not isinstance(v, bool):
        return [(f"{path}[{name}].bool", str(v), "must be a boolean")]
    if kinds[0] in ("string", "version"):
        if not isinstance(v, str):
            return [(f"{path}[{name}].{kinds[0]}", str(v), "must be a string")]
        if len(v) > MAX_VALUE_LEN:
            return [
                (f"{path}[{name}].{kinds[0]}", v, f"Too long: may not be more than {MAX_VALUE_LEN} bytes")
            ]
        if kinds[0] == "version" and not _SEMVER.match(v):
            return [(f"{path}[{name}].version", v, "must be a string compatible with semver.org spec 2.0.0")]
    return []


def _device_causes(path: str, dev: Any) -> Causes:
    if not isinstance(dev, dict):
        return [(path, str(dev), "must be an object")]
    causes: Causes = []
    err = _label_error(dev.get("name"))
    if err:
        causes.append((f"{path}.name", str(dev.get("name")), err))
    attrs = dev.get("attributes") or {}
    capacity = dev.get("capacity") or {}
    for name, value in attrs.items():
        causes += _attribute_causes(f"{path}.attributes", name, value)
    for name, value in capacity.items():
        err = _qualified_id_error(name)
        if err:
            causes.append((f"{path}.capacity", name, err))
        q = value.get("value") if isinstance(value, dict) else None
        if not isinstance(q, str | int) or not _is_quantity(str(q)):
            causes.append((f"{path}.capacity[{name}].value", str(q), "must be a quantity"))
    if len(attrs) + len(capacity) > MAX_ATTRS_AND_CAPACITY:
        causes.append(
            (
                path,
                "",
                f"Too many: {len(attrs) + len(capacity)}: must have at most {MAX_ATTRS_AND_CAPACITY} attributes and capacities combined",
            )
        )
    causes += _consumes_causes(f"{path}.consumesCounters", dev.get("consumesCounters") or [])
    taints = dev.get("taints") or []
    if not isinstance(taints, list):
        return [*causes, (f"{path}.taints", str(taints), "must be a list")]
    if len(taints) > MAX_TAINTS:
        causes.append((f"{path}.taints", "", f"Too many: must have at most {MAX_TAINTS} items"))
    for j, taint in enumerate(taints):
        causes += _taint_causes(f"{path}.taints[{j}]", taint)
    return causes


def _counters_causes(path: str, counters: Any) -> Causes:
    if not isinstance(counters, dict) or not counters:
        return [(path, "", "Required value")]
    if len(counters) > MAX_COUNTERS:
        return [(path, "", f"Too many: {len(counters)}: must have at most {MAX_COUNTERS} items")]
    causes: Causes = []
    for name, c in counters.items():
        err = _label_error(name)
        if err:
            causes.append((f"{path}[{name}]", str(name), err))
        q = c.get("value") if isinstance(c, dict) else None
        if not isinstance(q, str | int) or not _is_quantity(str(q)):
            causes.append((f"{path}[{name}].value", str(q), "must be a quantity"))
    return causes


def _consumes_causes(path: str, consumes: Any) -> Causes:
    """Device.consumesCounters: at most 2 entries, one per counter set (a DNS label),
    each with 1 to 32 counters named by DNS labels."""
    if not isinstance(consumes, list):
        return [(path, str(consumes), "must be a list")]
    if len(consumes) > MAX_CONSUMPTIONS:
        return [(path, "", f"Too many: {len(consumes)}: must have at most {MAX_CONSUMPTIONS} items")]
    causes: Causes = []
    seen: set[str] = set()
    for i, c in enumerate(consumes):
        p = f"{path}[{i}]"
        cs = c.get("counterSet") if isinstance(c, dict) else None
        err = _label_error(cs)
        if err:
            causes.append((f"{p}.counterSet", str(cs), err))
        elif cs in seen:
            causes.append((p, str(cs), "Duplicate value"))
        seen.add(str(cs))
        causes += _counters_causes(f"{p}.counters", c.get("counters") if isinstance(c, dict) else None)
    return causes


def _counter_sets_causes(path: str, sets: Any) -> Causes:
    """spec.sharedCounters: at most 8 sets with unique DNS-label names, 1 to 32 counters each."""
    if not isinstance(sets, list):
        return [(path, str(sets), "must be a list")]
    if len(sets) > MAX_COUNTER_SETS:
        return [(path, "", f"Too many: {len(sets)}: must have at most {MAX_COUNTER_SETS} items")]
    causes: Causes = []
    seen: set[str] = set()
    for i, cs in enumerate(sets):
        p = f"{path}[{i}]"
        name = cs.get("name") if isinstance(cs, dict) else None
        err = _label_error(name)
        if err:
            causes.append((f"{p}.name", str(name), err))
        elif name in seen:
            causes.append((p, str(name), "Duplicate value"))
        seen.add(str(name))
        causes += _counters_causes(f"{p}.counters", cs.get("counters") if isinstance(cs, dict) else None)
    return causes


def pool_counter_problems(slices: list[dict[str, Any]]) -> list[str]:
    """What the scheduler finds wrong with one pool's counters (the API server cannot
    check across slices): a device consuming from a counter set no slice of the pool
    defines, or a counter its set does not have."""
    sets: dict[str, dict[str, Any]] = {}
    for s in slices:
        for cs in (s.get("spec") or {}).get("sharedCounters") or []:
            sets[cs["name"]] = cs.get("counters") or {}
    problems = []
    for s in slices:
        for dev in (s.get("spec") or {}).get("devices") or []:
            for c in dev.get("consumesCounters") or []:
                have = sets.get(c["counterSet"])
                if have is None:
                    problems.append(f"device {dev['name']}: counter set {c['counterSet']} is not in the pool")
                    continue
                problems += [
                    f"device {dev['name']}: counter {n} is not in counter set {c['counterSet']}"
                    for n in c.get("counters") or {}
                    if n not in have
                ]
    return problems


def _taint_causes(path: str, taint: Any) -> Causes:
    if not isinstance(taint, dict):
        return [(path, str(taint), "must be an object")]
    causes: Causes = []
    key = taint.get("key")
    err = "Required value" if not key else _qualified_name_error(str(key))
    if err:
        causes.append((f"{path}.key", str(key), err))
    if "value" in taint:
        err = _label_value_error(taint["value"])
        if err:
            causes.append((f"{path}.value", str(taint["value"]), err))
    effect = taint.get("effect")
    if not effect:
        causes.append((f"{path}.effect", "", "Required value"))
    elif effect not in TAINT_EFFECTS:
        causes.append(
            (f"{path}.effect", str(effect), "supported values: " + ", ".join(f'"{e}"' for e in TAINT_EFFECTS))
        )
    added = taint.get("timeAdded")
    if added is not None:
        try:
            dt.datetime.fromisoformat(str(added).replace("Z", "+00:00"))
        except ValueError:
            causes.append((f"{path}.timeAdded", str(added), "must be an RFC 3339 time"))
    if set(taint) - {"key", "value", "effect", "timeAdded"}:
        causes.append(
            (path, "", f"unknown field(s) {sorted(set(taint) - {'key', 'value', 'effect', 'timeAdded'})}")
        )
    return causes


def _slice_strategy(obj: dict[str, Any], gates: Mapping[str, bool]) -> None:
    """Device taints and counters: dropped when their feature is off; else a taint
    without a time gets the time of the write, and a time is stored as RFC 3339 in UTC."""
    spec = obj.get("spec") or {}
    if not gates.get(PARTITIONABLE, True):
        spec.pop("sharedCounters", None)
        for dev in spec.get("devices") or []:
            if isinstance(dev, dict):
                dev.pop("consumesCounters", None)
    for dev in spec.get("devices") or []:
        if not isinstance(dev, dict) or "taints" not in dev:
            continue
        if not gates.get(DEVICE_TAINTS, True):
            del dev["taints"]
            continue
        for taint in dev["taints"] if isinstance(dev["taints"], list) else []:
            if not isinstance(taint, dict):
                continue
            if not taint.get("timeAdded"):
                taint["timeAdded"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                continue
            try:  # stored as whole seconds in UTC, "Z", whatever form it came in
                when = dt.datetime.fromisoformat(str(taint["timeAdded"]).replace("Z", "+00:00"))
                taint["timeAdded"] = when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            except ValueError:
                pass  # validation says so


def _validate_slice(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = _meta_causes(obj, old)
    spec = obj.get("spec") or {}
    err = _subdomain_error(spec.get("driver"), 63)
    if err:
        causes.append(("spec.driver", str(spec.get("driver")), err))
    pool = spec.get("pool") or {}
    name = pool.get("name")
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 253
        or any(_subdomain_error(p) for p in name.split("/"))
    ):
        causes.append(
            ("spec.pool.name", str(name), "must be one or more DNS sub-domains separated by slashes")
        )
    gen, count = pool.get("generation"), pool.get("resourceSliceCount")
    if isinstance(gen, bool) or not isinstance(gen, int) or gen < 0:
        causes.append(("spec.pool.generation", str(gen), "must be greater than or equal to 0"))
    if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
        causes.append(("spec.pool.resourceSliceCount", str(count), "must be greater than zero"))
    chosen = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)]
    if len(chosen) != 1:
        causes.append(
            (
                "spec",
                "",
                "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
            )
        )
    if old is not None:
        old_spec = old.get("spec") or {}
        for key in ("driver", "nodeName"):
            if spec.get(key) != old_spec.get(key):
                causes.append((f"spec.{key}", str(spec.get(key)), "field is immutable"))
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        causes.append(("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    if spec.get("sharedCounters") is not None:
        causes += _counter_sets_causes("spec.sharedCounters", spec["sharedCounters"])
    devices = spec.get("devices") or []
    tainted = any(isinstance(d, dict) and (d.get("taints") or d.get("consumesCounters")) for d in devices)
    limit = MAX_DEVICES_WITH_TAINTS if tainted else MAX_DEVICES
    if len(devices) > limit:
        causes.append(("spec.devices", "", f"Too many: {len(devices)}: must have at most {limit} items"))
    seen: set[str] = set()
    for i, dev in enumerate(devices):
        causes += _device_causes(f"spec.devices[{i}]", dev)
        name = dev.get("name") if isinstance(dev, dict) else None
        if isinstance(name, str):
            if name in seen:
                causes.append((f"spec.devices[{i}].name", name, "Duplicate value"))
            seen.add(name)
    if causes:
        raise invalid("ResourceSlice", GROUP, obj["metadata"]["name"], causes)


def _validate_claim(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = _meta_causes(obj, old)
    spec = obj.get("spec") or {}
    if old is not None and spec != (old.get("spec") or {}):
        causes.append(("spec", "", "field is immutable"))
    requests = (spec.get("devices") or {}).get("requests") or []
    if len(requests) > MAX_REQUESTS:
        causes.append(("spec.devices.requests", "", f"Too many: must have at most {MAX_REQUESTS} items"))
    names: set[str] = set()
    for i, req in enumerate(requests):
        path = f"spec.devices.requests[{i}]"
        err = _label_error(req.get("name"))
        if err:
            causes.append((f"{path}.name", str(req.get("name")), err))
        elif req["name"] in names:
            causes.append((f"{path}.name", req["name"], "Duplicate value"))
        names.add(str(req.get("name")))
        if ("exactly" in req) == ("firstAvailable" in req):
            causes.append((path, "", "exactly one of `exactly` or `firstAvailable` is required"))
        exactly = req.get("exactly") or {}
        if "exactly" in req and _subdomain_error(exactly.get("deviceClassName")):
            causes.append(
                (f"{path}.exactly.deviceClassName", str(exactly.get("deviceClassName")), "Required value")
            )
    results = (((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
    for i, r in enumerate(results):
        path = f"status.allocation.devices.results[{i}]"
        if r.get("request") not in names and str(r.get("request", "")).split("/")[0] not in names:
            causes.append(
                (f"{path}.request", str(r.get("request")), "must be the name of a request in the claim")
            )
        for key, check in (("driver", lambda v: _subdomain_error(v, 63)), ("device", _label_error)):
            err = check(r.get(key))
            if err:
                causes.append((f"{path}.{key}", str(r.get(key)), err))
        if not r.get("pool"):
            causes.append((f"{path}.pool", "", "Required value"))
    allocated = {(r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID")) for r in results}
    causes += _device_status_causes((obj.get("status") or {}).get("devices") or [], allocated)
    if causes:
        raise invalid("ResourceClaim", GROUP, obj["metadata"]["name"], causes)


def _device_status_causes(devices: Any, allocated: set[tuple[Any, ...]]) -> Causes:
    """status.devices (KEP-4817) as the API server checks it: each entry names an
    allocated device of the claim, once; conditions as metav1 conditions; data a JSON
    object of at most 10 KiB; networkData within its limits, IPs in CIDR form."""
    if not isinstance(devices, list):
        return [("status.devices", str(devices), "must be a list")]
    causes: Causes = []
    seen: set[tuple[Any, ...]] = set()
    for i, d in enumerate(devices):
        path = f"status.devices[{i}]"
        if not isinstance(d, dict):
            causes.append((path, str(d), "must be an object"))
            continue
        key = (d.get("driver"), d.get("pool"), d.get("device"), d.get("shareID"))
        ident = "/".join(str(k) for k in key[:3])
        if key not in allocated:
            causes.append((path, ident, "must be an allocated device in the claim"))
        if key in seen:
            causes.append((path, ident, "Duplicate value"))
        seen.add(key)
        conditions = d.get("conditions") or []
        if len(conditions) > MAX_STATUS_CONDITIONS:
            causes.append(
                (f"{path}.conditions", "", f"Too many: must have at most {MAX_STATUS_CONDITIONS} items")
            )
        causes += _condition_causes(f"{path}.conditions", conditions)
        if "data" in d and d["data"] is not None:
            if not isinstance(d["data"], dict):
                causes.append((f"{path}.data", "<value omitted>", "must be a valid JSON object"))
            elif len(json.dumps(d["data"], separators=(",", ":"))) > MAX_STATUS_DATA:
                causes.append((f"{path}.data", "", f"Too long: may not be more than {MAX_STATUS_DATA} bytes"))
        net = d.get("networkData") or {}
        for field, limit in (("interfaceName", 256), ("hardwareAddress", 128)):
            if len(str(net.get(field) or "")) > limit:
                causes.append(
                    (f"{path}.networkData.{field}", "", f"Too long: may not be more than {limit} bytes")
                )
        ips = net.get("ips") or []
        if len(ips) > MAX_STATUS_IPS:
            causes.append(
                (f"{path}.networkData.ips", "", f"Too many: must have at most {MAX_STATUS_IPS} items")
            )
        for j, ip in enumerate(ips):
            try:
                ipaddress.ip_interface(ip)
                if "/" not in ip:
                    raise ValueError(ip)
            except ValueError:
                causes.append(
                    (f"{path}.networkData.ips[{j}]", str(ip), "must be a valid address in CIDR form")
                )
            if ip in ips[:j]:
                causes.append((f"{path}.networkData.ips[{j}]", str(ip), "Duplicate value"))
    return causes


_CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def _condition_causes(path: str, conditions: Any) -> Causes:
    """metav1 conditions: a qualified type, once; status True, False or Unknown; a
    lastTransitionTime; a CamelCase reason; a message of at most 32768 characters."""
    causes: Causes = []
    types: set[str] = set()
    for i, c in enumerate(conditions if isinstance(conditions, list) else []):
        p = f"{path}[{i}]"
        if not isinstance(c, dict):
            causes.append((p, str(c), "must be an object"))
            continue
        ctype = c.get("type")
        err = "Required value" if not ctype else _qualified_name_error(str(ctype))
        if err:
            causes.append((f"{p}.type", str(ctype), err))
        elif ctype in types:
            causes.append((f"{p}.type", str(ctype), "Duplicate value"))
        types.add(str(ctype))
        if c.get("status") not in ("True", "False", "Unknown"):
            causes.append(
                (
                    f"{p}.status",
                    str(c.get("status")),
                    'Unsupported value: supported values: "False", "True", "Unknown"',
                )
            )
        if not c.get("lastTransitionTime"):
            causes.append((f"{p}.lastTransitionTime", "", "Required value: must be set"))
        reason = c.get("reason")
        if not reason:
            causes.append((f"{p}.reason", "", "Required value"))
        elif len(str(reason)) > 1024 or not _CONDITION_REASON.match(str(reason)):
            causes.append(
                (
                    f"{p}.reason",
                    str(reason),
                    "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'",
                )
            )
        if len(str(c.get("message") or "")) > 32768:
            causes.append((f"{p}.message", "", "Too long: may not be more than 32768 bytes"))
    return causes


def _validate_class(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    causes = _meta_causes(obj, old)
    spec = obj.get("spec") or {}
    selectors = spec.get("selectors") or []
    if len(selectors) > MAX_SELECTORS:
        causes.append(("spec.selectors", "", f"Too many: must have at most {MAX_SELECTORS} items"))
    for i, sel in enumerate(selectors):
        expr = ((sel or {}).get("cel") or {}).get("expression")
        if not isinstance(expr, str) or not expr.strip():
            causes.append((f"spec.selectors[{i}].cel.expression", "", "Required value"))
        elif len(expr) > MAX_CEL_LEN:
            causes.append(
                (
                    f"spec.selectors[{i}].cel.expression",
                    "",
                    f"Too long: may not be more than {MAX_CEL_LEN} bytes",
                )
            )
    ext = spec.get("extendedResourceName")
    if ext is not None:
        domain = str(ext).partition("/")[0]
        if (
            not isinstance(ext, str)
            or "/" not in ext
            or _qualified_name_error(ext)
            or domain == "kubernetes.io"
            or domain.endswith(".kubernetes.io")
        ):
            causes.append(("spec.extendedResourceName", str(ext), "must be a valid extended resource name"))
    if causes:
        raise invalid("DeviceClass", GROUP, obj["metadata"]["name"], causes)


RESOURCE_SLICES = ResourceType(
    GROUP,
    "v1",
    "resourceslices",
    "ResourceSlice",
    namespaced=False,
    field_selectors=frozenset({"metadata.name", "spec.nodeName", "spec.driver"}),
    validate=_validate_slice,
    gated=_slice_strategy,
)
RESOURCE_CLAIMS = ResourceType(
    GROUP,
    "v1",
    "resourceclaims",
    "ResourceClaim",
    namespaced=True,
    subresources=frozenset({"status"}),
    field_selectors=frozenset({"metadata.name", "metadata.namespace"}),
    validate=_validate_claim,
)
DEVICE_CLASSES = ResourceType(
    GROUP,
    "v1",
    "deviceclasses",
    "DeviceClass",
    namespaced=False,
    validate=_validate_class,
)
DRA_TYPES = (RESOURCE_SLICES, RESOURCE_CLAIMS, DEVICE_CLASSES)
