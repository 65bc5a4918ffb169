"""FPGA cards as allocatable devices, found as the fpga feature source finds them.

Config::

    resources:
      - name: fpga.intel.com/arria10
        fpga: {vendor: intel, device: "09c4"}     # an Intel PAC: its DFL port node
      - name: xilinx.com/fpga-u250
        fpga: {vendor: xilinx, driver: xocl}      # the Alveo's user function

Each card gets the device nodes its driver makes under its PCI device in sysfs: DFL's
``/dev/dfl-port.N`` (``/dev/dfl-fme.N`` too with ``fme: true``, for loading bitstreams), or
the DRM render node of a Xilinx XRT user function. More nodes or env come from the
resource's templates (fields: address, vendor, device, driver, fpga_vendor, card).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from nfd.devices.kinds.model import DeviceNode, FoundDevice
from nfd.devices.kinds.shared import describe_fields, mapping, optional_hex_ids, optional_strings, pci_problem
from nfd.features import Features
from nfd.hostfiles import list_dir
from nfd.hostroot import HostRoot
from nfd.hw.accel_ids import FPGA_VENDORS, INTEL_FPGA_DEVICES, vendor_name
from nfd.hw.accel_pci import pci_functions
from nfd.settings import ConfigError

_KEYS = ("vendor", "device", "driver", "fme")
VENDORS = ("intel", "xilinx", "silicom")
FIELDS = frozenset({"address", "vendor", "device", "driver", "fpga_vendor", "card"})


@dataclass(frozen=True)
class FpgaSelector:
    vendor: str
    devices: tuple[str, ...] = ()
    drivers: tuple[str, ...] = ()
    fme: bool = False


class FpgaKind:
    name = "fpga"
    template_fields = FIELDS
    udev_subsystems = ("pci",)

    def parse_selector(self, raw: Any, where: str) -> FpgaSelector:
        m = mapping(raw, where, _KEYS)
        vendor = m.get("vendor")
        if vendor not in VENDORS:
            raise ConfigError(f"{where}.vendor: required, one of {', '.join(VENDORS)}")
        fme = m.get("fme", False)
        if not isinstance(fme, bool):
            raise ConfigError(f"{where}.fme: expected true or false")
        return FpgaSelector(
            vendor=vendor,
            devices=optional_hex_ids(m, "device", where, 4),
            drivers=optional_strings(m, "driver", where),
            fme=fme,
        )

    def describe(self, selector: Any) -> str:
        s: FpgaSelector = selector
        return describe_fields("fpga", (("vendor", s.vendor), ("device", s.devices), ("driver", s.drivers)))

    def discover(
        self, selector: Any, *, resource: str, features: Features, host: HostRoot
    ) -> list[FoundDevice]:
        sel: FpgaSelector = selector
        out: list[FoundDevice] = []
        for f in pci_functions(host, classes=("12",), vendors=tuple(FPGA_VENDORS)):
            if vendor_name(f) != sel.vendor:
                continue
            if (sel.devices and f.device not in sel.devices) or (sel.drivers and f.driver not in sel.drivers):
                continue
            attrs = {
                "address": f.address,
                "vendor": f.vendor,
                "device": f.device,
                "driver": f.driver,
                "fpga_vendor": sel.vendor,
                "card": INTEL_FPGA_DEVICES.get(f.device, "") if f.vendor == "8086" else "",
            }
            out.append(
                FoundDevice(
                    id=f.address,
                    numa_node=f.numa_node,
                    device_nodes=card_nodes(host, f.address, fme=sel.fme),
                    attributes=attrs,
                )
            )
        return out

    def refresh(self, device: FoundDevice, host: HostRoot) -> FoundDevice | str:
        a = device.attributes
        return pci_problem(host, a["address"], a.get("driver", "")) or device


def card_nodes(host: HostRoot, address: str, *, fme: bool) -> tuple[DeviceNode, ...]:
    """The device nodes a card's driver made, found below its PCI device in sysfs."""
    d = host.sys / "bus" / "pci" / "devices" / address
    nodes: list[DeviceNode] = []
    for region in list_dir(d / "fpga_region"):
        for child in list_dir(d / "fpga_region" / region):
            if child.startswith("dfl-port.") or (fme and child.startswith("dfl-fme.")):
                nodes.append(DeviceNode(f"/dev/{child}", f"/dev/{child}", "rw"))
    for child in list_dir(d / "drm"):
        if child.startswith("renderD") and os.path.exists(host.dev / "dri" / child):
            nodes.append(DeviceNode(f"/dev/dri/{child}", f"/dev/dri/{child}", "rw"))
    return tuple(nodes)
