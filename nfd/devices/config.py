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
      - name: example.com/gpu
        gpu: {vendor: nvidia}
        servedBy: dra                     # devicePlugin (default) or dra, never both
        extendedResourceName: example.com/gpu   # default: name; false: none
    dra:
      driverName: nfd.node.kubernetes.io  # the default

Every error is a :class:`ConfigError` whose message starts with the key path at fault
(``resources[1].pci.vendor: ...``).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nfd.devices.kinds import DeviceKind, KindRegistry, default_kinds
from nfd.devices.model import ConfigError
from nfd.policy import qualified_name_error

_TOP_KEYS = ("resources", "dra")
_RESOURCE_KEYS = (
    "name",
    "deviceNodes",
    "mounts",
    "env",
    "replicas",
    "cdi",
    "preStartCheck",
    "servedBy",
    "extendedResourceName",
)
DEVICE_PLUGIN = "devicePlugin"
DRA = "dra"
SERVED_BY = (DEVICE_PLUGIN, DRA)
# NFD already owns this domain (its annotations live under it), so the driver may claim it.
DEFAULT_DRIVER_NAME = "nfd.node.kubernetes.io"
MAX_DRIVER_NAME = 63
MAX_DRA_RESOURCE = 64  # a DRA string attribute's limit: devices carry their resource's name
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
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
    served_by: str = DEVICE_PLUGIN
    # For DRA: the extended resource a DeviceClass maps to these devices, so that pods
    # asking for it in resources.limits are served through DRA. None: not mapped.
    extended_resource_name: str | None = None

    @property
    def dra(self) -> bool:
        return self.served_by == DRA


@dataclass(frozen=True)
class PluginConfig:
    resources: tuple[ResourceConfig, ...]
    driver_name: str = DEFAULT_DRIVER_NAME

    def served_by(self, how: str) -> tuple[ResourceConfig, ...]:
        return tuple(r for r in self.resources if r.served_by == how)


def dns_subdomain_error(name: object, max_len: int = 253) -> str | None:
    if not isinstance(name, str) or not name:
        return "expected a DNS subdomain like dra.example.com"
    if len(name) > max_len:
        return f"{name!r} is longer than {max_len} characters"
    if not all(_DNS_LABEL.match(p) for p in name.split(".")):
        return f"{name!r} is not a DNS subdomain (lower-case letters, digits, '-', dots between labels)"
    return None


def driver_name_error(name: object) -> str | None:
    """A DRA driver name is a DNS subdomain of at most 63 characters."""
    return dns_subdomain_error(name, MAX_DRIVER_NAME)


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
    seen: dict[str, str] = {}
    for i, item in enumerate(raw):
        res = _resource(item, f"resources[{i}]", kinds)
        for name, what in ((res.name, "name"), (res.extended_resource_name, "extendedResourceName")):
            if name is None or (what == "extendedResourceName" and name == res.name):
                continue
            if name in seen and what == "name" and seen[name].endswith(".name"):
                raise ConfigError(f"resources[{i}].name: {name!r} is declared twice")
            if name in seen:
                raise ConfigError(f"resources[{i}].{what}: {name!r} is already served by {seen[name]}")
            seen[name] = f"resources[{i}].{what}"
        out.append(res)
    return PluginConfig(tuple(out), driver_name=_dra_section(data.get("dra")))


def _dra_section(raw: Any) -> str:
    if raw is None:
        return DEFAULT_DRIVER_NAME
    if not isinstance(raw, dict):
        raise ConfigError("dra: expected a mapping with driverName")
    for key in raw:
        if key != "driverName":
            raise ConfigError(f"dra.{key}: unknown key (known: driverName)")
    name = raw.get("driverName", DEFAULT_DRIVER_NAME)
    err = driver_name_error(name)
    if err:
        raise ConfigError(f"dra.driverName: invalid driver name: {err}")
    assert isinstance(name, str)
    return name


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
    served_by, ext_name = _served_by(item, where, name)
    if served_by == DRA and replicas != 1:
        raise ConfigError(f"{where}.replicas: DRA hands out whole devices; replicas is for the device plugin")
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
        served_by=served_by,
        extended_resource_name=ext_name,
    )


def _served_by(item: dict[str, Any], where: str, name: str) -> tuple[str, str | None]:
    raw = item.get("servedBy", DEVICE_PLUGIN)
    if isinstance(raw, list):
        if set(raw) == set(SERVED_BY):
            raise ConfigError(
                f"{where}.servedBy: {name} is served by the device plugin or by DRA, never both"
                " (one device must not be offered twice)"
            )
        raw = raw[0] if len(raw) == 1 else raw
    if raw not in SERVED_BY:
        raise ConfigError(f"{where}.servedBy: expected one of {', '.join(SERVED_BY)}, got {raw!r}")
    if raw == DRA and len(name) > MAX_DRA_RESOURCE:
        raise ConfigError(
            f"{where}.name: {name!r} is longer than {MAX_DRA_RESOURCE} characters, the limit of"
            " the DRA attribute that names it"
        )
    ext = item.get("extendedResourceName", name if raw == DRA else None)
    if raw == DEVICE_PLUGIN:
        if "extendedResourceName" in item:
            raise ConfigError(
                f"{where}.extendedResourceName: only for servedBy: dra (the device plugin serves {name} itself)"
            )
        return raw, None
    if ext is False or ext is None:
        return raw, None
    if not isinstance(ext, str):
        raise ConfigError(
            f"{where}.extendedResourceName: expected a resource name like example.com/gpu, or false"
        )
    err = extended_resource_error(ext)
    if err:
        raise ConfigError(f"{where}.extendedResourceName: invalid resource name: {err}")
    return raw, ext


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
    from nfd.devices.cdi import CDI_VERSION, CDI_VERSIONS

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
