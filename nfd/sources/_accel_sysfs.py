"""sysfs facts about PCI accelerators (GPUs, FPGAs), shared by the gpu and fpga sources
and the GPU device kind."""

from __future__ import annotations

from dataclasses import dataclass

from nfd.hostroot import HostRoot
from nfd.sources._read import list_dir, read_line, read_link_name


@dataclass(frozen=True)
class PciFunction:
    address: str  # "0000:18:00.0"
    pci_class: str  # six hex digits, "030200"
    vendor: str  # four hex digits, "10de"
    device: str
    subsystem_vendor: str = ""
    subsystem_device: str = ""
    driver: str = ""  # bound kernel driver, "" when none
    numa_node: int | None = None  # None: no NUMA affinity (-1) or not shown

    @property
    def class_prefix(self) -> str:
        """Base class and subclass, as upstream's pci source names classes ("0302")."""
        return self.pci_class[:4]

    def attributes(self) -> dict[str, str]:
        out = {
            "pci_address": self.address,
            "class": self.class_prefix,
            "vendor": self.vendor,
            "device": self.device,
            "subsystem_vendor": self.subsystem_vendor,
            "subsystem_device": self.subsystem_device,
            "driver": self.driver,
        }
        if self.numa_node is not None:
            out["numa_node"] = str(self.numa_node)
        return {k: v for k, v in out.items() if v != ""}


def hex_id(text: str | None, width: int = 4) -> str:
    """``0x10de`` -> ``10de``; empty when unreadable."""
    if not text:
        return ""
    t = text.strip().lower()
    if t.startswith("0x"):
        t = t[2:]
    try:
        return f"{int(t, 16):0{width}x}"
    except ValueError:
        return ""


def numa_node(host: HostRoot, address: str) -> int | None:
    """The NUMA node of a PCI device from sysfs; None for -1 (none) or unknown."""
    raw = read_line(host.sys / "bus" / "pci" / "devices" / address / "numa_node")
    try:
        node = int(raw) if raw is not None else -1
    except ValueError:
        return None
    return node if node >= 0 else None


def pci_function(host: HostRoot, address: str) -> PciFunction | None:
    d = host.sys / "bus" / "pci" / "devices" / address
    pci_class = hex_id(read_line(d / "class"), 6)
    vendor = hex_id(read_line(d / "vendor"))
    if not pci_class or not vendor:
        return None
    return PciFunction(
        address=address,
        pci_class=pci_class,
        vendor=vendor,
        device=hex_id(read_line(d / "device")),
        subsystem_vendor=hex_id(read_line(d / "subsystem_vendor")),
        subsystem_device=hex_id(read_line(d / "subsystem_device")),
        driver=read_link_name(d / "driver") or "",
        numa_node=numa_node(host, address),
    )


def pci_functions(host: HostRoot) -> list[PciFunction]:
    """Every PCI function sysfs shows, in address order."""
    out = []
    for address in list_dir(host.sys / "bus" / "pci" / "devices"):
        f = pci_function(host, address)
        if f is not None:
            out.append(f)
    return out
