"""What the accelerator sources (gpu, fpga) and their device kinds share: sysfs facts
about PCI functions, and the ``.present``/``.count`` labels of a group of devices."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nfd import hostfiles
from nfd.hostfiles import link_name, list_dir, read_line

if TYPE_CHECKING:
    from nfd.features import Labels
    from nfd.hostroot import HostRoot


# Not compared, not printed (see docs/architecture.md, "Plain Python").
@dataclass(slots=True, eq=False, repr=False)
class PciFunction:
    """One PCI function, as sysfs describes it."""

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
    return hostfiles.numa_node(hostfiles.attr(f"{host.sys}/bus/pci/devices/{address}/numa_node"))


def _modalias_ids(text: str) -> tuple[str, ...] | None:
    """(vendor, device, subsystem vendor, subsystem device, base class, subclass, prog-if)
    from a PCI ``modalias``: ``pci:v0000VVVVd0000DDDDsv0000SSSSsd0000ssssbcBBscSSiII``,
    every field at a fixed place."""
    if len(text) != 53 or not text.startswith("pci:v0000"):
        return None
    if (text[13:18], text[22:28], text[32:38], text[42:44], text[46:48], text[50]) != (
        "d0000",
        "sv0000",
        "sd0000",
        "bc",
        "sc",
        "i",
    ):
        return None
    ids = (text[9:13], text[18:22], text[28:32], text[38:42], text[44:46], text[48:50], text[51:53])
    return ids if re.fullmatch(r"[0-9a-fA-F]*", "".join(ids)) else None


def _identity(d: str) -> tuple[str, str, str, str, str] | None:
    """(class, vendor, device, subsystem vendor, subsystem device) of the function in
    sysfs directory ``d``: from ``modalias`` in one read, else from the separate files."""
    ids = _modalias_ids(read_line(f"{d}/modalias") or "")
    if ids:
        v, dev, sv, sd, bc, sc, pi = (g.lower() for g in ids)
        return bc + sc + pi, v, dev, sv, sd
    pci_class = hex_id(read_line(f"{d}/class"), 6)
    vendor = hex_id(read_line(f"{d}/vendor"))
    if not pci_class or not vendor:
        return None
    return (
        pci_class,
        vendor,
        hex_id(read_line(f"{d}/device")),
        hex_id(read_line(f"{d}/subsystem_vendor")),
        hex_id(read_line(f"{d}/subsystem_device")),
    )


def _function(address: str, d: str, ident: tuple[str, str, str, str, str]) -> PciFunction:
    pci_class, vendor, device, sub_vendor, sub_device = ident
    return PciFunction(
        address=address,
        pci_class=pci_class,
        vendor=vendor,
        device=device,
        subsystem_vendor=sub_vendor,
        subsystem_device=sub_device,
        driver=link_name(f"{d}/driver") or "",
        numa_node=hostfiles.numa_node(hostfiles.attr(f"{d}/numa_node")),
    )


def pci_functions(
    host: HostRoot, *, classes: tuple[str, ...] = (), vendors: tuple[str, ...] = ()
) -> list[PciFunction]:
    """PCI functions in address order: those whose class starts with one of ``classes``
    or whose vendor is one of ``vendors`` (every function when both are empty). A server
    has hundreds of functions: each costs one read (``modalias``) unless it is wanted."""
    base = f"{host.sys}/bus/pci/devices"
    out = []
    for address in list_dir(base):
        d = f"{base}/{address}"
        ident = _identity(d)
        if ident is None:
            continue
        pci_class, vendor = ident[0], ident[1]
        wanted = (
            (not classes and not vendors)
            or (bool(classes) and pci_class.startswith(classes))
            or vendor in vendors
        )
        if wanted:
            out.append(_function(address, d, ident))
    return out


def presence_labels(name: str, count: int) -> Labels:
    """``<name>.present`` and ``<name>.count`` for ``count`` devices; none for none."""
    return {f"{name}.present": "true", f"{name}.count": str(count)} if count else {}
