"""USB devices, selected from the ``usb.device`` feature instances."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from nfd import hostfiles
from nfd.devices.kinds.model import DeviceNode, FoundDevice, Gone
from nfd.devices.kinds.shared import describe_fields, mapping, optional_hex_ids, optional_strings
from nfd.features import Features
from nfd.hostroot import HostRoot

_KEYS = ("vendor", "product", "class", "serial")
_FIELDS = frozenset({"address", "vendor", "product", "class", "serial", "busnum", "devnum", "devpath"})


@dataclass(frozen=True, slots=True)
class UsbSelector:
    vendor: tuple[str, ...] = ()
    product: tuple[str, ...] = ()
    class_: tuple[str, ...] = ()
    serial: tuple[str, ...] = ()

    def matches(self, inst: dict[str, str]) -> bool:
        return (
            (not self.vendor or inst.get("vendor", "").lower() in self.vendor)
            and (not self.product or inst.get("device", "").lower() in self.product)
            and (not self.class_ or inst.get("class", "").lower() in self.class_)
            and (not self.serial or inst.get("serial", "") in self.serial)
        )


def _devpath(busnum: str, devnum: str) -> str | None:
    """The usbfs node: /dev/bus/usb/BBB/DDD."""
    try:
        return f"/dev/bus/usb/{int(busnum):03d}/{int(devnum):03d}"
    except ValueError:
        return None


class UsbKind:
    name = "usb"
    template_fields = _FIELDS
    udev_subsystems = ("usb",)

    def parse_selector(self, raw: Any, where: str) -> UsbSelector:
        m = mapping(raw, where, _KEYS)
        return UsbSelector(
            vendor=optional_hex_ids(m, "vendor", where, 4),
            product=optional_hex_ids(m, "product", where, 4),
            class_=optional_hex_ids(m, "class", where, 2),
            serial=optional_strings(m, "serial", where),
        )

    def describe(self, selector: Any) -> str:
        s: UsbSelector = selector
        return describe_fields(
            "usb", (("vendor", s.vendor), ("product", s.product), ("class", s.class_), ("serial", s.serial))
        )

    def _device(self, attrs: dict[str, str], host: HostRoot) -> FoundDevice:
        path = _devpath(attrs["busnum"], attrs["devnum"])
        attrs["devpath"] = path or ""
        nodes = (DeviceNode(path, path, "rw"),) if path else ()
        sysdir = host.sys / "bus/usb/devices" / attrs["address"]
        return FoundDevice(
            id=attrs["address"],
            numa_node=hostfiles.numa_above(sysdir, host.sys),
            device_nodes=nodes,
            attributes=attrs,
        )

    def discover(
        self, selector: Any, *, resource: str, features: Features, host: HostRoot
    ) -> list[FoundDevice]:
        sel: UsbSelector = selector
        found: dict[str, FoundDevice] = {}
        for inst in features.instances.get("usb.device", []):
            addr = inst.get("address", "")
            if not addr or addr in found or not sel.matches(inst):
                continue
            attrs = {k: inst.get(k, "") for k in ("address", "vendor", "class", "serial", "busnum", "devnum")}
            attrs["product"] = inst.get("device", "")
            found[addr] = self._device(attrs, host)
        return [found[a] for a in sorted(found)]

    def refresh(self, device: FoundDevice, host: HostRoot) -> FoundDevice | str:
        sysdir = host.sys / "bus/usb/devices" / device.attributes["address"]
        if not os.path.isdir(sysdir):
            return Gone("USB device unplugged")
        # A re-plugged device keeps its port (our ID) but gets a new device number, so its
        # node moves: follow it.
        busnum, devnum = hostfiles.attr(sysdir / "busnum"), hostfiles.attr(sysdir / "devnum")
        if (
            busnum
            and devnum
            and (busnum, devnum) != (device.attributes["busnum"], device.attributes["devnum"])
        ):
            attrs = {**device.attributes, "busnum": busnum, "devnum": devnum}
            return replace(self._device(attrs, host), env=device.env)
        return device
