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
    return _numa(read_line(f"{host.sys}/bus/pci/devices/{address}/numa_node"))


def _numa(raw: str | None) -> int | None:
    try:
        node = int(raw) if raw is not None else -1
    except ValueError:
        return None
    return node if node >= 0 else None


def pci_function(
    host: HostRoot, address: str, *, pci_class: str = "", vendor: str = ""
) -> PciFunction | None:
    """One PCI function's identity (``pci_class``/``vendor`` when the caller read them)."""
    d = f"{host.sys}/bus/pci/devices/{address}"
    pci_class = pci_class or hex_id(read_line(f"{d}/class"), 6)
    vendor = vendor or hex_id(read_line(f"{d}/vendor"))
    if not pci_class or not vendor:
        return None
    return PciFunction(
        address=address,
        pci_class=pci_class,
        vendor=vendor,
        device=hex_id(read_line(f"{d}/device")),
        subsystem_vendor=hex_id(read_line(f"{d}/subsystem_vendor")),
        subsystem_device=hex_id(read_line(f"{d}/subsystem_device")),
        driver=read_link_name(f"{d}/driver") or "",
        numa_node=_numa(read_line(f"{d}/numa_node")),
    )


def pci_functions(
    host: HostRoot, *, classes: tuple[str, ...] = (), vendors: tuple[str, ...] = ()
) -> list[PciFunction]:
    """PCI functions in address order: those whose class starts with one of ``classes``
    or whose vendor is one of ``vendors`` (every function when both are empty). A server
    has hundreds of functions; only the wanted ones are read beyond their class."""
    base = f"{host.sys}/bus/pci/devices"
    out = []
    for address in list_dir(base):
        pci_class = hex_id(read_line(f"{base}/{address}/class"), 6)
        vendor = ""
        wanted = (not classes and not vendors) or (bool(classes) and pci_class.startswith(classes))
        if not wanted and vendors:
            vendor = hex_id(read_line(f"{base}/{address}/vendor"))
            wanted = vendor in vendors
        if not wanted:
            continue
        f = pci_function(host, address, pci_class=pci_class, vendor=vendor)
        if f is not None:
            out.append(f)
    return out
