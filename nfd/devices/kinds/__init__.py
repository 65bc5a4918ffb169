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

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from nfd.devices.kinds.model import FoundDevice
from nfd.features import Features
from nfd.hostroot import HostRoot


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
    # MIG instance), raising nfd.devices.kinds.model.PrepareError.


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
