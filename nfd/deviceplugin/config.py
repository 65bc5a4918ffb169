"""The device-plugin config file: which resources to serve, and what a container gets.

Example::

    resources:
      - name: example.com/fpga
        pci: {vendor: "1172", class: "12"}
        deviceNodes: ["/dev/vfio/{iommu_group}", "/dev/vfio/vfio"]
        env: {FPGA_ADDRESSES: "{address}"}
      - name: example.com/serial
        usb: {vendor: "0403", product: "6001"}
        replicas: 2
        cdi: true

Every error is a :class:`ConfigError` whose message starts with the key path at fault
(``resources[1].pci.vendor: ...``).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nfd.deviceplugin.kinds import DeviceKind, KindRegistry, default_kinds
from nfd.deviceplugin.model import ConfigError
from nfd.policy import qualified_name_error

_TOP_KEYS = ("resources",)
_RESOURCE_KEYS = ("name", "deviceNodes", "mounts", "env", "replicas", "cdi", "preStartCheck")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CDI_VENDOR = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_CDI_CLASS = re.compile(r"^[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?$")
MAX_REPLICAS = 1024


@dataclass(frozen=True, slots=True)
class NodeTemplate:
    host_path: str
    container_path: str
    permissions: str = "rwm"


@dataclass(frozen=True, slots=True)
class MountTemplate:
    host_path: str
    container_path: str
    read_only: bool = True


@dataclass(frozen=True)
class ResourceConfig:
    name: str
    kind: DeviceKind
    selector: Any
    device_nodes: tuple[NodeTemplate, ...] = ()
    mounts: tuple[MountTemplate, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    replicas: int = 1
    cdi_kind: str | None = None  # "vendor.com/class" when CDI is on
    cdi_version: str = "1.0.0"
    pre_start_check: bool = False
    where: str = ""


@dataclass(frozen=True)
class PluginConfig:
    resources: tuple[ResourceConfig, ...]


def extended_resource_error(name: str) -> str | None:
    """Kubernetes' rules for an extended-resource name that a device plugin may serve."""
    domain, sep, base = name.partition("/")
    if not sep or not domain or not base:
        return f"{name!r} must be 'vendor-domain/name' (for example example.com/fpga)"
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        return f"{name!r}: the kubernetes.io domain is reserved for native resources"
    if name.startswith("requests."):
        return f"{name!r} must not start with 'requests.'"
    err = qualified_name_error(name)
    if err is None:
        err = qualified_name_error("requests." + name)  # how the API server checks quotas
    return err


def load_config(path: str | Path, kinds: KindRegistry | None = None) -> PluginConfig:
    """Raises ConfigError, one line that names the file once (and the key)."""
    from nfd.config import load_config_file

    config, _ = load_config_file(path, lambda data, _w: parse_config(data, kinds), error=ConfigError)
    return config


def parse_config(data: Any, kinds: KindRegistry | None = None) -> PluginConfig:
    kinds = kinds or default_kinds()
    if not isinstance(data, dict):
        raise ConfigError("config: expected a mapping with a 'resources' list")
    for key in data:
        if key not in _TOP_KEYS:
            raise ConfigError(f"{key}: unknown key (known: {', '.join(_TOP_KEYS)})")
    raw = data.get("resources")
    if raw is None:
        raise ConfigError("resources: required, a list of resources")
    if not isinstance(raw, list):
        raise ConfigError("resources: expected a list of resources")
    # An empty list is allowed: a deployment may ship the plugin before anything is
    # configured; the plugin then serves nothing and says so.
    out: list[ResourceConfig] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        res = _resource(item, f"resources[{i}]", kinds)
        if res.name in seen:
            raise ConfigError(f"resources[{i}].name: {res.name!r} is declared twice")
        seen.add(res.name)
        out.append(res)
    return PluginConfig(tuple(out))


def _resource(item: Any, where: str, kinds: KindRegistry) -> ResourceConfig:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping")
    known = (*_RESOURCE_KEYS, *kinds.names())
    for key in item:
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(known)})")
    name = item.get("name")
    if not isinstance(name, str):
        raise ConfigError(f"{where}.name: required, a string like example.com/fpga")
    err = extended_resource_error(name)
    if err:
        raise ConfigError(f"{where}.name: invalid resource name: {err}")
    chosen = [k for k in kinds.names() if k in item]
    if len(chosen) != 1:
        raise ConfigError(
            f"{where}: needs exactly one device selector ({', '.join(kinds.names())})"
            + (f", got {', '.join(chosen)}" if chosen else "")
        )
    kind = kinds.get(chosen[0])
    assert kind is not None
    selector = kind.parse_selector(item[chosen[0]], f"{where}.{kind.name}")
    fields = kind.template_fields

    nodes = tuple(
        _node(n, f"{where}.deviceNodes[{j}]", fields) for j, n in enumerate(_list(item, "deviceNodes", where))
    )
    mounts = tuple(
        _mount(m, f"{where}.mounts[{j}]", fields) for j, m in enumerate(_list(item, "mounts", where))
    )
    env_raw = item.get("env") or {}
    if not isinstance(env_raw, dict):
        raise ConfigError(f"{where}.env: expected a mapping of NAME: value")
    env: list[tuple[str, str]] = []
    for k, v in env_raw.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            raise ConfigError(f"{where}.env: {k!r} is not a valid environment variable name")
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise ConfigError(f"{where}.env.{k}: expected a string")
        env.append((k, _template(str(v), f"{where}.env.{k}", fields)))

    replicas = item.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        raise ConfigError(f"{where}.replicas: expected an integer from 1 to {MAX_REPLICAS}")
    pre_start = item.get("preStartCheck", False)
    if not isinstance(pre_start, bool):
        raise ConfigError(f"{where}.preStartCheck: expected true or false")
    cdi_kind, cdi_version = _cdi(item.get("cdi", False), f"{where}.cdi", name)
    if cdi_kind and not nodes and not mounts and kind.name == "pci":
        raise ConfigError(f"{where}.cdi: a CDI device needs something to inject: add deviceNodes or mounts")
    return ResourceConfig(
        name=name,
        kind=kind,
        selector=selector,
        device_nodes=nodes,
        mounts=mounts,
        env=tuple(env),
        replicas=replicas,
        cdi_kind=cdi_kind,
        cdi_version=cdi_version,
        pre_start_check=pre_start,
        where=where,
    )


def _list(item: dict[str, Any], key: str, where: str) -> list[Any]:
    v = item.get(key) or []
    if not isinstance(v, list):
        raise ConfigError(f"{where}.{key}: expected a list")
    return v


def _template(text: str, where: str, fields: frozenset[str]) -> str:
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as e:
        raise ConfigError(f"{where}: bad template {text!r}: {e}") from None
    for _lit, field, spec, conv in parsed:
        if field is None:
            continue
        if field not in fields or spec or conv:
            raise ConfigError(
                f"{where}: unknown placeholder {{{field}}} (known: {', '.join('{' + f + '}' for f in sorted(fields))})"
            )
    return text


def _abs(v: Any, where: str, fields: frozenset[str]) -> str:
    if not isinstance(v, str) or not v.startswith("/"):
        raise ConfigError(f"{where}: expected an absolute path")
    return _template(v, where, fields)


def _node(raw: Any, where: str, fields: frozenset[str]) -> NodeTemplate:
    if isinstance(raw, str):
        raw = {"path": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a path or a mapping with path, containerPath, permissions")
    for key in raw:
        if key not in ("path", "containerPath", "permissions"):
            raise ConfigError(f"{where}.{key}: unknown key (known: path, containerPath, permissions)")
    path = _abs(raw.get("path"), f"{where}.path", fields)
    if not path.startswith("/dev/"):
        raise ConfigError(f"{where}.path: device nodes live under /dev/")
    container = _abs(raw.get("containerPath", path), f"{where}.containerPath", fields)
    perms = raw.get("permissions", "rwm")
    if not isinstance(perms, str) or not perms or set(perms) - set("rwm") or len(set(perms)) != len(perms):
        raise ConfigError(f"{where}.permissions: expected some of r, w, m (like rw or rwm)")
    return NodeTemplate(path, container, perms)


def _mount(raw: Any, where: str, fields: frozenset[str]) -> MountTemplate:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with hostPath, containerPath, readOnly")
    for key in raw:
        if key not in ("hostPath", "containerPath", "readOnly"):
            raise ConfigError(f"{where}.{key}: unknown key (known: hostPath, containerPath, readOnly)")
    host = _abs(raw.get("hostPath"), f"{where}.hostPath", fields)
    container = _abs(raw.get("containerPath", host), f"{where}.containerPath", fields)
    ro = raw.get("readOnly", True)
    if not isinstance(ro, bool):
        raise ConfigError(f"{where}.readOnly: expected true or false")
    return MountTemplate(host, container, ro)


def _cdi(raw: Any, where: str, resource: str) -> tuple[str | None, str]:
    from nfd.deviceplugin.cdi import CDI_VERSION, CDI_VERSIONS

    if raw is False or raw is None:
        return None, CDI_VERSION
    if raw is True:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected true, false or a mapping with kind, version")
    for key in raw:
        if key not in ("kind", "version"):
            raise ConfigError(f"{where}.{key}: unknown key (known: kind, version)")
    kind = raw.get("kind", resource)
    version = raw.get("version", CDI_VERSION)
    if version not in CDI_VERSIONS:
        raise ConfigError(f"{where}.version: expected one of {', '.join(CDI_VERSIONS)} (a quoted string)")
    vendor, sep, cls = kind.partition("/") if isinstance(kind, str) else ("", "", "")
    if not sep or not _CDI_VENDOR.match(vendor) or not _CDI_CLASS.match(cls):
        raise ConfigError(
            f"{where}: {kind!r} is not a CDI kind 'vendor.com/class' (class: letters, digits, '-', '_');"
            " set cdi: {kind: ...}"
        )
    return kind, version
