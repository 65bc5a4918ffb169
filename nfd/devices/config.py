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

pydantic models (camelCase keys, unknown keys refused); the device selector is the one
key a resource takes from its registry of kinds, parsed by that kind. Every error is a
:class:`ConfigError` whose message starts with the key path at fault
(``resources[1].pci.vendor: ...``).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.functional_validators import ModelWrapValidatorHandler

from nfd.devices.cdi import CDI_VERSION, CDI_VERSIONS
from nfd.devices.kinds import DeviceKind, KindRegistry, default_kinds
from nfd.devices.model import DeviceNode, Mount
from nfd.policy import dns_subdomain_error, qualified_name_error
from nfd.settings import ConfigError, load_file
from nfd.validation import NestedError, error_line

DEVICE_PLUGIN: Final = "devicePlugin"
DRA: Final = "dra"
# NFD already owns this domain (its annotations live under it), so the driver may claim it.
DEFAULT_DRIVER_NAME = "nfd.node.kubernetes.io"
MAX_DRIVER_NAME = 63
MAX_DRA_RESOURCE = 64  # a DRA string attribute's limit: devices carry their resource's name
MAX_REPLICAS = 1024
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CDI_KIND = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?/[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?$")
# Validation context: the kinds a resource may select, and the placeholders its
# templates may use (those of the kind of the resource being validated).
_KINDS = "kinds"
_FIELDS = "template_fields"


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


def _checked(error: Callable[[str], str | None], what: str) -> AfterValidator:
    def check(value: str) -> str:
        err = error(value)
        if err:
            raise ValueError(f"{what}: {err}")
        return value

    return AfterValidator(check)


_ResourceName = Annotated[StrictStr, _checked(extended_resource_error, "invalid resource name")]


def _context(info: ValidationInfo) -> dict[str, Any]:
    assert info.context is not None  # parse_config gives one
    return cast(dict[str, Any], info.context)


def _template_error(text: str, info: ValidationInfo) -> str | None:
    fields: frozenset[str] = _context(info)[_FIELDS]
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as e:
        return f"bad template {text!r}: {e}"
    for _lit, field, spec, conv in parsed:
        if field is not None and (field not in fields or spec or conv):
            known = ", ".join("{" + f + "}" for f in sorted(fields))
            return f"unknown placeholder {{{field}}} (known: {known})"
    return None


def _container_path(raw: Any, host_key: str) -> Any:
    """The container sees a path where the host does unless told otherwise."""
    if isinstance(raw, dict) and host_key in raw:
        return {"containerPath": raw[host_key], **raw}
    return raw


def _paths(item: DeviceNode | Mount, host_key: str, info: ValidationInfo) -> None:
    """Both paths absolute, with the kind's placeholders only."""
    for key, path in ((host_key, item.host_path), ("containerPath", item.container_path)):
        err = "expected an absolute path" if not path.startswith("/") else _template_error(path, info)
        if err:
            raise NestedError(key, err)


def _node_input(raw: Any) -> Any:
    return _container_path({"path": raw} if isinstance(raw, str) else raw, "path")  # a path alone


def _node(node: DeviceNode, info: ValidationInfo) -> DeviceNode:
    _paths(node, "path", info)
    if not node.host_path.startswith("/dev/"):
        raise NestedError("path", "device nodes live under /dev/")
    perms = node.permissions
    if not perms or set(perms) - set("rwm") or len(set(perms)) != len(perms):
        raise NestedError("permissions", "expected some of r, w, m (like rw or rwm)")
    return node


def _mount_input(raw: Any) -> Any:
    # Mount is a plain dataclass, validated in pydantic's lax mode: "yes" or 1 would pass as true.
    if isinstance(raw, dict) and not isinstance(raw.get("readOnly", True), bool):
        raise NestedError("readOnly", "expected true or false")
    return _container_path(raw, "hostPath")


def _mount(mount: Mount, info: ValidationInfo) -> Mount:
    _paths(mount, "hostPath", info)
    return mount


def _env(raw: Any, info: ValidationInfo) -> Any:
    """``{NAME: value}`` -> ``((NAME, value), ...)``; numbers are taken as strings."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ValueError("expected a mapping of NAME: value")
    out = []
    for k, v in raw.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            raise ValueError(f"{k!r} is not a valid environment variable name")
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise NestedError(k, "expected a string")
        err = _template_error(str(v), info)
        if err:
            raise NestedError(k, err)
        out.append((k, str(v)))
    return tuple(out)


def _one_server(raw: Any) -> Any:
    if isinstance(raw, list) and {DEVICE_PLUGIN, DRA} == {v for v in raw if isinstance(v, str)}:
        raise ValueError(
            "served by the device plugin or by DRA, never both (one device must not be offered twice)"
        )
    return raw[0] if isinstance(raw, list) and len(raw) == 1 else raw


def _null_as(empty: Any) -> BeforeValidator:
    """A key left empty in YAML (``deviceNodes:``) is null: the same as leaving it out."""
    return BeforeValidator(lambda v: empty if v is None else v)


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", frozen=True)


class CdiConfig(_Model):
    kind: StrictStr | None = None  # default: the resource's name
    version: Literal[CDI_VERSIONS] = CDI_VERSION  # type: ignore[valid-type]


class ResourceConfig(_Model):
    """One resource; besides these keys exactly one device selector (``pci``, ``usb``, ...,
    a key of the registry's kinds), which becomes :attr:`kind` and :attr:`selector`."""

    name: _ResourceName
    device_nodes: Annotated[
        tuple[Annotated[DeviceNode, BeforeValidator(_node_input), AfterValidator(_node)], ...], _null_as(())
    ] = ()
    mounts: Annotated[
        tuple[Annotated[Mount, BeforeValidator(_mount_input), AfterValidator(_mount)], ...], _null_as(())
    ] = ()
    env: Annotated[tuple[tuple[str, str], ...], BeforeValidator(_env)] = ()
    replicas: StrictInt = Field(1, ge=1, le=MAX_REPLICAS)
    cdi: Annotated[
        CdiConfig | None, BeforeValidator(lambda v: {} if v is True else None if v is False else v)
    ] = None
    pre_start_check: StrictBool = False
    served_by: Annotated[Literal["devicePlugin", "dra"], BeforeValidator(_one_server)] = DEVICE_PLUGIN
    # For DRA: the extended resource a DeviceClass maps to these devices, so that pods
    # asking for it in resources.limits are served through DRA. Default: the name;
    # false: not mapped. See extended_resource_name.
    extended_resource: Annotated[
        _ResourceName | None,
        BeforeValidator(lambda v: None if v is False else v),
    ] = Field(None, alias="extendedResourceName")

    _kind: DeviceKind = PrivateAttr()
    _selector: Any = PrivateAttr()
    _where: str = PrivateAttr("")

    @model_validator(mode="wrap")
    @classmethod
    def _device(cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo) -> Self:
        context = _context(info)
        kinds: KindRegistry = context[_KINDS]
        if not isinstance(data, dict):
            return handler(data)
        chosen = [k for k in kinds.names() if k in data]
        if len(chosen) != 1:
            raise ValueError(
                f"needs exactly one device selector ({', '.join(kinds.names())})"
                + (f", got {', '.join(chosen)}" if chosen else "")
            )
        kind = kinds.get(chosen[0])
        assert kind is not None
        try:
            selector = kind.parse_selector(data[kind.name], kind.name)
        except ConfigError as e:  # its message starts with the key path we gave it
            key, _, why = str(e).partition(": ")
            raise NestedError(key, why) from None
        context[_FIELDS] = kind.template_fields
        res = handler({k: v for k, v in data.items() if k != kind.name})
        res._kind, res._selector = kind, selector
        res._check()
        return res

    def _check(self) -> None:
        """What involves several keys."""
        if self.dra:
            if self.replicas != 1:
                raise NestedError(
                    "replicas", "DRA hands out whole devices; replicas is for the device plugin"
                )
            if len(self.name) > MAX_DRA_RESOURCE:
                raise NestedError(
                    "name",
                    f"{self.name!r} is longer than {MAX_DRA_RESOURCE} characters, the limit of the DRA"
                    " attribute that names it",
                )
        elif "extended_resource" in self.model_fields_set:
            raise NestedError(
                "extendedResourceName",
                f"only for servedBy: dra (the device plugin serves {self.name} itself)",
            )
        if self.cdi_kind is not None and not _CDI_KIND.match(self.cdi_kind):
            raise NestedError(
                "cdi",
                f"{self.cdi_kind!r} is not a CDI kind 'vendor.com/class' (class: letters, digits, '-', '_');"
                " set cdi: {kind: ...}",
            )
        if self.cdi_kind and not self.device_nodes and not self.mounts and self.kind.name == "pci":
            raise NestedError("cdi", "a CDI device needs something to inject: add deviceNodes or mounts")

    @property
    def kind(self) -> DeviceKind:
        return self._kind

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
        if not self.dra:
            return None
        return self.extended_resource if "extended_resource" in self.model_fields_set else self.name

    @property
    def cdi_kind(self) -> str | None:
        """``vendor.com/class`` when CDI is on."""
        if self.cdi is None:
            return None
        return self.name if self.cdi.kind is None else self.cdi.kind  # "" is no kind: an error

    @property
    def cdi_version(self) -> str:
        return CDI_VERSION if self.cdi is None else str(self.cdi.version)


class DraConfig(_Model):
    driver_name: Annotated[StrictStr, _checked(driver_name_error, "invalid driver name")] = (
        DEFAULT_DRIVER_NAME
    )
    # NoSchedule keeps new claims off an unhealthy device; NoExecute also evicts the
    # pods using it.
    taint_effect: Literal["NoSchedule", "NoExecute"] = "NoSchedule"


class PluginConfig(_Model):
    # An empty list is allowed: a deployment may ship the plugin before anything is
    # configured; the plugin then serves nothing and says so.
    resources: tuple[ResourceConfig, ...]
    dra: Annotated[DraConfig, _null_as({})] = DraConfig()

    @model_validator(mode="after")
    def _names(self) -> PluginConfig:
        """Each name (and extended-resource name) is served once."""
        seen: dict[str, str] = {}
        for i, res in enumerate(self.resources):
            res._where = f"resources[{i}]"
            for what, name in (("name", res.name), ("extendedResourceName", res.extended_resource_name)):
                if name is None or (what == "extendedResourceName" and name == res.name):
                    continue
                if name in seen:
                    twice = what == "name" and seen[name].endswith(".name")
                    raise NestedError(
                        f"{res.where}.{what}",
                        f"{name!r} is declared twice"
                        if twice
                        else f"{name!r} is already served by {seen[name]}",
                    )
                seen[name] = f"{res.where}.{what}"
        return self

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
    try:
        return PluginConfig.model_validate(data, context={_KINDS: kinds or default_kinds()})
    except ValidationError as e:
        raise ConfigError(error_line(e)) from None
