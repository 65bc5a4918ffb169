"""PCI devices, selected from the ``pci.device`` feature instances."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from nfd import hostfiles
from nfd.devices.kinds.model import FoundDevice, env_name
from nfd.devices.kinds.shared import describe_fields, mapping, optional_hex_ids, optional_strings, pci_problem
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.settings import ConfigError

_KEYS = ("vendor", "device", "class", "driver", "address")
_FIELDS = frozenset(
    {
        "address",
        "vendor",
        "device",
        "class",
        "subsystem_vendor",
        "subsystem_device",
        "driver",
        "numa_node",
        "iommu_group",
    }
)
_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_ADDRESS_GLOB = re.compile(r"^[0-9a-f:.*?\[\]!-]+$")


@dataclass(frozen=True, slots=True)
class PciSelector:
    """Every given key must match; several values for one key are alternatives."""

    vendor: tuple[str, ...] = ()
    device: tuple[str, ...] = ()
    class_prefix: tuple[str, ...] = ()  # "03" matches every display controller, "0300" VGA
    driver: tuple[str, ...] = ()
    address: tuple[str, ...] = ()  # shell globs: "0000:3b:*"

    def matches(self, inst: dict[str, str]) -> bool:
        def low(k: str) -> str:
            return inst.get(k, "").lower()

        return (
            (not self.vendor or low("vendor") in self.vendor)
            and (not self.device or low("device") in self.device)
            and (not self.class_prefix or any(low("class").startswith(p) for p in self.class_prefix))
            and (not self.driver or inst.get("driver", "") in self.driver)
            and (not self.address or any(fnmatchcase(low("address"), a) for a in self.address))
        )


class PciKind:
    name = "pci"
    template_fields = _FIELDS
    udev_subsystems = ("pci",)

    def parse_selector(self, raw: Any, where: str) -> PciSelector:
        m = mapping(raw, where, _KEYS)
        addresses = tuple(a.lower() for a in optional_strings(m, "address", where))
        for a in addresses:
            if not (_ADDRESS.match(a) or (any(c in a for c in "*?[") and _ADDRESS_GLOB.match(a))):
                raise ConfigError(
                    f"{where}.address: {a!r} is not a PCI address like 0000:3b:00.0 (globs allowed)"
                )
        return PciSelector(
            vendor=optional_hex_ids(m, "vendor", where, 4),
            device=optional_hex_ids(m, "device", where, 4),
            class_prefix=optional_hex_ids(m, "class", where, 6),
            driver=optional_strings(m, "driver", where),
            address=addresses,
        )

    def describe(self, selector: Any) -> str:
        s: PciSelector = selector
        return describe_fields(
            "pci",
            (
                ("vendor", s.vendor),
                ("device", s.device),
                ("class", s.class_prefix),
                ("driver", s.driver),
                ("address", s.address),
            ),
        )

    def discover(
        self, selector: Any, *, resource: str, features: Features, host: HostRoot
    ) -> list[FoundDevice]:
        sel: PciSelector = selector
        found: dict[str, FoundDevice] = {}
        for inst in features.instances.get("pci.device", []):
            addr = inst.get("address", "").lower()
            if not addr or addr in found or not sel.matches(inst):
                continue
            attrs = {k: inst.get(k, "") for k in _FIELDS}
            attrs["address"] = addr
            sysdir = host.sys / "bus/pci/devices" / addr
            if not attrs["iommu_group"]:  # the group's number is the name its link points to
                attrs["iommu_group"] = hostfiles.link_name(sysdir / "iommu_group") or ""
            numa = hostfiles.numa_node(hostfiles.attr(sysdir / "numa_node"))
            if numa is None and not (sysdir / "numa_node").exists():
                numa = hostfiles.numa_node(inst.get("numa_node"))  # sysfs unreadable: trust discovery
            found[addr] = FoundDevice(
                id=addr,
                numa_node=numa,
                env=((f"PCIDEVICE_{env_name(resource)}", addr),),
                attributes=attrs,
            )
        return [found[a] for a in sorted(found)]

    def refresh(self, device: FoundDevice, host: HostRoot) -> FoundDevice | str:
        a = device.attributes
        return pci_problem(host, a["address"], a.get("driver", "")) or device
