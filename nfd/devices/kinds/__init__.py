"""Device kinds: the extension point for what a resource can select.

A kind is named by the key a resource uses in the config (``pci``, ``usb``, ``devnode``;
a GPU module adds ``gpu``). It turns its part of the config into a selector, finds the
matching devices on the node, and re-checks a device's health on every poll. Everything
else (replicas, templates, env joining, CDI, gRPC, registration) is shared and kinds
know nothing about it.

To add a kind, implement :class:`DeviceKind` and pass a registry holding it to
:func:`nfd.devices.config.load_config` / :class:`nfd.deviceplugin.manager.Manager`
(``default_kinds().with_kind(GpuKind())``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from nfd import hostfiles
from nfd.chars import shown
from nfd.devices.model import FoundDevice, Gone
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.settings import ConfigError, key_name


@runtime_checkable
class DeviceKind(Protocol):
    @property
    def name(self) -> str:
        """The config key that selects this kind."""
        ...

    @property
    def template_fields(self) -> frozenset[str]:
        """``{placeholders}`` a resource's deviceNodes/mounts/env may use: the keys of
        every :attr:`FoundDevice.attributes` this kind returns."""
        ...

    @property
    def udev_subsystems(self) -> tuple[str, ...]:
        """udev subsystems whose events should trigger an immediate health re-check
        (empty: polling only)."""
        ...

    def parse_selector(self, raw: Any, where: str) -> Any:
        """Validate this kind's config value; raise ConfigError naming ``where`` (the
        key path, e.g. ``resources[0].pci.vendor``). The result is opaque to callers and
        comes back to :meth:`discover`."""
        ...

    def describe(self, selector: Any) -> str:
        """The selector in a few words, for messages."""
        ...

    def discover(
        self, selector: Any, *, resource: str, features: Features, host: HostRoot
    ) -> list[FoundDevice]:
        """The devices matching ``selector``, in a stable order. Runs once at start."""
        ...

    def refresh(self, device: FoundDevice, host: HostRoot) -> FoundDevice | str:
        """Re-check one device now: the device (the same object when nothing changed, a
        new one when e.g. its device node moved) while it is usable, else a short reason
        it is not ("sysfs entry gone", "driver unbound"). Called every ~200 ms for every
        device, so it must be cheap (a few stat/readlink calls)."""
        ...

    # Optional, not part of the protocol's required surface: ``close()`` is called once
    # when the plugin stops, for kinds that hold resources (an NVML handle, a thread);
    # ``prepare_device(device, host) -> FoundDevice`` and ``unprepare_device(device)``
    # are called by DRA's prepare and unprepare, for kinds that make something then (a
    # MIG instance), raising nfd.devices.model.PrepareError.


class KindRegistry:
    """Kinds by config key; immutable, so no module-level mutable state is needed."""

    def __init__(self, kinds: tuple[DeviceKind, ...] = ()) -> None:
        self._kinds: dict[str, DeviceKind] = {}
        for k in kinds:
            if k.name in self._kinds:
                raise ValueError(f"device kind {k.name!r} is registered twice")
            self._kinds[k.name] = k

    def with_kind(self, kind: DeviceKind) -> KindRegistry:
        return KindRegistry((*self._kinds.values(), kind))

    def get(self, name: str) -> DeviceKind | None:
        return self._kinds.get(name)

    def names(self) -> list[str]:
        return list(self._kinds)

    def __iter__(self) -> Iterator[DeviceKind]:
        return iter(self._kinds.values())


def default_kinds() -> KindRegistry:
    from nfd.devices.kinds.devnode import DevNodeKind
    from nfd.devices.kinds.fpga import FpgaKind
    from nfd.devices.kinds.gpu import GpuKind
    from nfd.devices.kinds.pci import PciKind
    from nfd.devices.kinds.usb import UsbKind

    return KindRegistry((PciKind(), UsbKind(), DevNodeKind(), GpuKind(), FpgaKind()))


# -- helpers for kinds' selector parsing ---------------------------------------------------


def string_list(raw: Any, where: str) -> tuple[str, ...]:
    """A string or a list of strings. Numbers are refused: YAML reads ``0300`` as an octal
    number and ``8086`` as an int, so hex IDs must be quoted."""
    items = [raw] if not isinstance(raw, list) else raw
    if not items:
        raise ConfigError(f"{where}: must not be empty")
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str):
            hint = " (quote hex IDs: YAML reads 0300 or 8086 as numbers)" if isinstance(item, int) else ""
            raise ConfigError(f"{where}: expected a string or a list of strings, got {shown(item)}{hint}")
        if not item.strip():
            raise ConfigError(f"{where}: empty string")
        out.append(item.strip())
    return tuple(out)


def mapping(raw: Any, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with keys {', '.join(allowed)}")
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"{where}.{key_name(key)}: unknown selector key (known: {', '.join(allowed)})")
    if not raw:
        raise ConfigError(f"{where}: empty selector (use at least one of {', '.join(allowed)})")
    return raw


def hex_ids(raw: Any, where: str, width: int) -> tuple[str, ...]:
    """Hex IDs (``8086``, ``0x8086``), lower-cased without ``0x``."""
    out = []
    for item in string_list(raw, where):
        v = item.lower().removeprefix("0x")
        if not v or len(v) > width or any(c not in "0123456789abcdef" for c in v):
            raise ConfigError(f"{where}: {item!r} is not a hex ID of at most {width} digits")
        out.append(v)
    return tuple(out)


def optional_strings(m: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    """:func:`string_list` of ``m[key]``; empty when the selector does not give the key."""
    return string_list(m[key], f"{where}.{key}") if key in m else ()


def optional_hex_ids(m: dict[str, Any], key: str, where: str, width: int) -> tuple[str, ...]:
    """:func:`hex_ids` of ``m[key]``; empty when the selector does not give the key."""
    return hex_ids(m[key], f"{where}.{key}", width) if key in m else ()


def describe_fields(kind: str, fields: Iterable[tuple[str, str | Sequence[str]]]) -> str:
    """``kind k=v k=a|b`` for a selector's non-empty fields (``--check`` output, logs)."""
    parts = [f"{k}={v if isinstance(v, str) else '|'.join(v)}" for k, v in fields if v]
    return " ".join([kind, *parts])


# -- helpers for kinds' health -------------------------------------------------------------


def pci_problem(host: HostRoot, address: str, driver: str) -> str | None:
    """Why the PCI device at ``address`` is not usable now (gone from sysfs, or ``driver``
    no longer bound to it); None when it is. An empty ``driver`` asks for none."""
    sysdir = host.sys / "bus/pci/devices" / address
    if not os.path.isdir(sysdir):
        return Gone("PCI device gone from sysfs")
    if driver:
        have = hostfiles.driver_name(sysdir)
        if have is None:
            return f"driver {driver} unbound"
        if have != driver:
            return f"driver changed from {driver} to {have}"
    return None
