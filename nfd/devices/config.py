"""The device config file: which resources to serve, and what a container gets.

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
      taintEffect: NoSchedule             # of an unhealthy device's taint; or NoExecute

Models of :mod:`nfd.settings` (camelCase keys, unknown keys refused, no value coerced
but a number in ``env``); the device selector is the one key a resource takes from its
registry of kinds, parsed by that kind. Every error is a :class:`ConfigError` whose
message starts with the key path at fault (``resources[1].pci.vendor: ...``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Final

from nfd.devices.cdi import CDI_VERSION, CDI_VERSIONS
from nfd.devices.configvalues import (
    checked,
    one_of,
    parse_device_nodes,
    parse_env,
    parse_items,
    parse_mounts,
    parse_string,
    strict,
    template_error,
)
from nfd.devices.kinds import DeviceKind, KindRegistry, default_kinds
from nfd.devices.kinds.model import DeviceNode, Mount
from nfd.policy import dns_subdomain_error, qualified_name_error
from nfd.settings import ConfigError, from_mapping, load_file

DEVICE_PLUGIN: Final = "devicePlugin"
DRA: Final = "dra"
# NFD already owns this domain (its annotations live under it), so the driver may claim it.
DEFAULT_DRIVER_NAME = "nfd.node.kubernetes.io"
MAX_DRIVER_NAME = 63
MAX_DRA_RESOURCE = 64  # a DRA string attribute's limit: devices carry their resource's name
MAX_REPLICAS = 1024
TAINT_EFFECTS = ("NoSchedule", "NoExecute")
_CDI_KIND = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?/[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?$")


def driver_name_error(name: str) -> str | None:
    """A DRA driver name is a DNS subdomain of at most 63 characters."""
    if len(name) > MAX_DRIVER_NAME:
        return f"{name!r} is longer than {MAX_DRIVER_NAME} characters"
    return dns_subdomain_error(name)


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


# -- values (the models' ``parse`` functions) -------------------------------------------


def _cdi(value: Any, where: str) -> CdiConfig | None:
    if value is True:
        return CdiConfig()
    if value is False or value is None:
        return None
    return from_mapping(CdiConfig, value, warnings=[], where=where)


def _cdi_kind(value: Any, where: str) -> str | None:
    return None if value is None else parse_string(value, where)


def _served_by(value: Any, where: str) -> str:
    if isinstance(value, list) and {DEVICE_PLUGIN, DRA} == {v for v in value if isinstance(v, str)}:
        raise ConfigError(
            "served by the device plugin or by DRA, never both (one device must not be offered twice)", where
        )
    return one_of(DEVICE_PLUGIN, DRA)(
        value[0] if isinstance(value, list) and len(value) == 1 else value, where
    )


def _extended_resource(value: Any, where: str) -> str | bool:
    if value is None or value is False:
        return False
    if value is True:
        raise ConfigError("expected a resource name or false", where)
    return checked(extended_resource_error, "invalid resource name")(value, where)


# -- the models ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CdiConfig:
    __unknown_keys__: ClassVar[str] = "error"
    kind: str | None = field(default=None, metadata={"parse": _cdi_kind})  # default: the resource's name
    version: str = field(default=CDI_VERSION, metadata={"parse": one_of(*CDI_VERSIONS)})


@dataclass(frozen=True)
class ResourceConfig:
    """One resource; besides these keys exactly one device selector (``pci``, ``usb``, ...,
    a key of the registry's kinds), which becomes :attr:`kind` and :attr:`selector`."""

    __unknown_keys__: ClassVar[str] = "error"
    name: str = field(metadata={"parse": checked(extended_resource_error, "invalid resource name")})
    device_nodes: tuple[DeviceNode, ...] = field(default=(), metadata={"parse": parse_device_nodes})
    mounts: tuple[Mount, ...] = field(default=(), metadata={"parse": parse_mounts})
    env: tuple[tuple[str, str], ...] = field(default=(), metadata={"parse": parse_env})
    replicas: int = field(default=1, metadata={"parse": strict(int), "ge": 1, "le": MAX_REPLICAS})
    cdi: CdiConfig | None = field(default=None, metadata={"parse": _cdi})
    pre_start_check: bool = field(default=False, metadata={"parse": strict(bool)})
    served_by: str = field(default=DEVICE_PLUGIN, metadata={"parse": _served_by})
    # For DRA: the extended resource a DeviceClass maps to these devices, so that pods
    # asking for it in resources.limits are served through DRA. True: the name; false:
    # not mapped. See extended_resource_name.
    extended_resource: str | bool = field(
        default=True, metadata={"key": "extendedResourceName", "parse": _extended_resource}
    )
    _kind: Any = field(default=None, compare=False, repr=False, metadata={"internal": True})
    _selector: Any = field(default=None, compare=False, repr=False, metadata={"internal": True})
    _where: str = field(default="", compare=False, repr=False, metadata={"internal": True})

    def _check(self) -> None:
        """What involves several keys, or the kind's placeholders."""
        fields = self.kind.template_fields
        for i, node in enumerate(self.device_nodes):
            for key, path in (("path", node.host_path), ("containerPath", node.container_path)):
                self._template(f"deviceNodes[{i}].{key}", path, fields)
        for i, mount in enumerate(self.mounts):
            for key, path in (("hostPath", mount.host_path), ("containerPath", mount.container_path)):
                self._template(f"mounts[{i}].{key}", path, fields)
        for k, v in self.env:
            err = template_error(v, fields)
            if err:
                raise ConfigError(err, f"{self.where}.env.{k}")
        if self.dra:
            if self.replicas != 1:
                raise ConfigError(
                    "DRA hands out whole devices; replicas is for the device plugin", f"{self.where}.replicas"
                )
            if len(self.name) > MAX_DRA_RESOURCE:
                raise ConfigError(
                    f"{self.name!r} is longer than {MAX_DRA_RESOURCE} characters, the limit of the DRA"
                    " attribute that names it",
                    f"{self.where}.name",
                )
        elif getattr(self.selector, "mig_partitions", False):
            # Overlapping MIG placements can only be handed out with DRA's counters.
            raise ConfigError(
                "MIG partitions are served through DRA only: set servedBy: dra", f"{self.where}.gpu"
            )
        elif self.extended_resource is not True:
            raise ConfigError(
                f"only for servedBy: dra (the device plugin serves {self.name} itself)",
                f"{self.where}.extendedResourceName",
            )
        if self.cdi_kind is not None and not _CDI_KIND.match(self.cdi_kind):
            raise ConfigError(
                f"{self.cdi_kind!r} is not a CDI kind 'vendor.com/class' (class: letters, digits, '-', '_');"
                " set cdi: {kind: ...}",
                f"{self.where}.cdi",
            )
        if self.cdi_kind and not self.device_nodes and not self.mounts and self.kind.name == "pci":
            raise ConfigError(
                "a CDI device needs something to inject: add deviceNodes or mounts", f"{self.where}.cdi"
            )

    def _template(self, key: str, path: str, fields: frozenset[str]) -> None:
        err = "expected an absolute path" if not path.startswith("/") else template_error(path, fields)
        if err:
            raise ConfigError(err, f"{self.where}.{key}")

    @property
    def kind(self) -> DeviceKind:
        kind: DeviceKind = self._kind
        return kind

    @property
    def selector(self) -> Any:
        """The kind's parsed selector, opaque here."""
        return self._selector

    @property
    def where(self) -> str:
        """Its key path in the file (``resources[1]``), for messages."""
        return self._where

    @property
    def dra(self) -> bool:
        return self.served_by == DRA

    @property
    def extended_resource_name(self) -> str | None:
        if not self.dra or self.extended_resource is False:
            return None
        return self.name if self.extended_resource is True else str(self.extended_resource)

    @property
    def cdi_kind(self) -> str | None:
        """``vendor.com/class`` when CDI is on."""
        if self.cdi is None:
            return None
        return self.name if self.cdi.kind is None else self.cdi.kind  # "" is no kind: an error

    @property
    def cdi_version(self) -> str:
        return CDI_VERSION if self.cdi is None else str(self.cdi.version)


@dataclass(frozen=True)
class DraConfig:
    __unknown_keys__: ClassVar[str] = "error"
    driver_name: str = field(
        default=DEFAULT_DRIVER_NAME, metadata={"parse": checked(driver_name_error, "invalid driver name")}
    )
    # NoSchedule keeps new claims off an unhealthy device; NoExecute also evicts the
    # pods using it.
    taint_effect: str = field(default="NoSchedule", metadata={"parse": one_of(*TAINT_EFFECTS)})


@dataclass(frozen=True)
class PluginConfig:
    # An empty list is allowed: a deployment may ship the plugin before anything is
    # configured; the plugin then serves nothing and says so.
    __unknown_keys__: ClassVar[str] = "error"
    resources: tuple[ResourceConfig, ...] = field(metadata={"raw": True})  # parse_config reads them
    dra: DraConfig = field(default_factory=DraConfig)

    @property
    def driver_name(self) -> str:
        return self.dra.driver_name

    def served_by(self, how: str) -> tuple[ResourceConfig, ...]:
        return tuple(r for r in self.resources if r.served_by == how)


def load_config(path: str | Path, kinds: KindRegistry | None = None) -> PluginConfig:
    """Raises ConfigError, one line that names the file once (and the key)."""
    config, _ = load_file(path, lambda data, _w: parse_config(data, kinds))
    return config


def parse_config(data: Any, kinds: KindRegistry | None = None) -> PluginConfig:
    """The file's document; raises ConfigError naming the key at fault."""
    registry = kinds or default_kinds()
    config = from_mapping(PluginConfig, data, warnings=[])
    resources = tuple(
        _resource(raw, f"resources[{i}]", registry)
        for i, raw in enumerate(parse_items(config.resources, "resources"))
    )
    _served_once(resources)
    return replace(config, resources=resources)


def _resource(raw: Any, where: str, kinds: KindRegistry) -> ResourceConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"expected a mapping, got {type(raw).__name__}", where)
    chosen = [k for k in kinds.names() if k in raw]
    if len(chosen) != 1:
        raise ConfigError(
            f"needs exactly one device selector ({', '.join(kinds.names())})"
            + (f", got {', '.join(chosen)}" if chosen else ""),
            where,
        )
    kind = kinds.get(chosen[0])
    assert kind is not None
    selector = kind.parse_selector(raw[kind.name], f"{where}.{kind.name}")  # its errors name the key
    res = from_mapping(
        ResourceConfig, {k: v for k, v in raw.items() if k != kind.name}, warnings=[], where=where
    )
    res = replace(res, _kind=kind, _selector=selector, _where=where)
    res._check()
    return res


def _served_once(resources: tuple[ResourceConfig, ...]) -> None:
    """Each name (and extended-resource name) is served once."""
    seen: dict[str, str] = {}
    for res in resources:
        for what, name in (("name", res.name), ("extendedResourceName", res.extended_resource_name)):
            if name is None or (what == "extendedResourceName" and name == res.name):
                continue
            if name in seen:
                twice = what == "name" and seen[name].endswith(".name")
                raise ConfigError(
                    f"{name!r} is declared twice" if twice else f"{name!r} is already served by {seen[name]}",
                    f"{res.where}.{what}",
                )
            seen[name] = f"{res.where}.{what}"
