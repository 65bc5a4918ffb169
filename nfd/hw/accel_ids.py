"""Which PCI functions are accelerators: the PCI classes of GPUs, the vendors of FPGA
cards and Intel's FPGA cards by device id. The gpu and fpga sources and the device kinds
read the same tables, so that a card a label counts is a card the device plugin serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nfd.hw.accel_pci import PciFunction

# PCI classes that are GPUs: VGA, 3D controller, other display controller.
GPU_CLASSES = ("0300", "0302", "0380")

# Vendors whose class-12 functions are FPGA cards, and the name used in labels.
FPGA_VENDORS: dict[str, str] = {
    "1172": "intel",  # Altera
    "10ee": "xilinx",  # AMD/Xilinx Alveo, Versal
    "1c2c": "silicom",  # Silicom Denmark FPGA SmartNICs (N5010/N5011)
}
# Intel (8086) FPGA cards by device id: the ids the kernel's dfl-pci driver (and Intel's
# OPAE intel-fpga-pci driver) bind to, with the card they are.
INTEL_FPGA_DEVICES: dict[str, str] = {
    "09c4": "pac-arria10",
    "09c5": "pac-arria10-vf",
    "0b2b": "pac-d5005",
    "0b2c": "pac-d5005-vf",
    "0b30": "pac-n3000",
    "bcbd": "integrated-5",
    "bcbf": "integrated-5-vf",
    "bcc0": "integrated-6",
    "bcc1": "integrated-6-vf",
    "bcce": "dfl",
    "bccf": "dfl-vf",
}
FPGA_DRIVERS = frozenset({"dfl-pci", "intel-fpga-pci", "xclmgmt", "xocl", "xdma", "qdma-pf", "qdma-vf"})


def vendor_name(f: PciFunction) -> str | None:
    if f.vendor == "8086":
        if f.class_prefix.startswith("12") and (f.device in INTEL_FPGA_DEVICES or f.driver in FPGA_DRIVERS):
            return "intel"
        return None
    if f.vendor in FPGA_VENDORS and (f.class_prefix.startswith("12") or f.driver in FPGA_DRIVERS):
        return FPGA_VENDORS[f.vendor]
    return None
