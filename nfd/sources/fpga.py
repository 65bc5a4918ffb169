"""The fpga feature source: FPGA cards on PCI, and the kernel's FPGA framework
(``/sys/class/fpga_region``, ``/sys/class/fpga_manager``, Intel's DFL bus).

Raw features (``fpga`` domain):

- ``fpga.device`` (instances): PCI functions that are FPGA cards: class 12xx from an
  FPGA vendor (Intel/Altera, AMD/Xilinx, Silicom), or an Intel function that a kernel
  FPGA driver claims or whose id is a known FPGA card. Intel's other class-12 parts (NPUs)
  and AMD's Instinct GPUs (also class 1200) are not FPGAs and are left out.
- ``fpga.region``, ``fpga.manager`` (instances): the FPGA framework's class devices.
- ``fpga.dfl`` (instances): devices on the DFL bus (FME, ports, private features).

Labels: ``fpga-device.present``/``.count`` and ``fpga-<vendor>.present``/``.count``
(``intel``, ``xilinx``, ``silicom``), ``fpga-region.present``, ``fpga-dfl.present``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nfd.features import Features
from nfd.hostfiles import exists, link_name, list_dir, read_line
from nfd.hw.accel_ids import FPGA_VENDORS, INTEL_FPGA_DEVICES, vendor_name
from nfd.hw.accel_pci import pci_functions, presence_labels

if TYPE_CHECKING:
    from nfd.config import SourcesConfig
    from nfd.features import Instance, Labels
    from nfd.hostroot import HostRoot


class FpgaSource:
    name = "fpga"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        feats = Features()
        devices: list[Instance] = []
        for f in pci_functions(host, classes=("12",), vendors=tuple(FPGA_VENDORS)):
            vendor = vendor_name(f)
            if vendor is None:
                continue
            inst = f.attributes()
            inst["fpga_vendor"] = vendor
            if f.vendor == "8086" and f.device in INTEL_FPGA_DEVICES:
                inst["card"] = INTEL_FPGA_DEVICES[f.device]
            d = host.sys / "bus" / "pci" / "devices" / f.address
            if exists(d / "physfn"):
                inst["vf"] = "true"
            for key in ("sriov_totalvfs", "sriov_numvfs"):
                v = read_line(d / key)
                if v:
                    inst[key] = v
            devices.append(inst)
        found = {
            "fpga.device": devices,
            "fpga.region": _class_devices(host, "fpga_region", ("compat_id", "type")),
            "fpga.manager": _class_devices(host, "fpga_manager", ("name", "state", "status")),
            "fpga.dfl": _dfl_devices(host),
        }
        # Only what exists: a node without FPGAs has no fpga features, as upstream's has none.
        for name, items in found.items():
            if items:
                feats.set_instances(name, items)
        return feats

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        out: Labels = {}
        devices = features.instances.get("fpga.device", [])
        out.update(presence_labels("device", len(devices)))
        vendors = [d.get("fpga_vendor", "") for d in devices]
        for vendor in sorted(set(vendors) - {""}):
            out.update(presence_labels(vendor, vendors.count(vendor)))
        if features.instances.get("fpga.region"):
            out["region.present"] = "true"
        if features.instances.get("fpga.dfl"):
            out["dfl.present"] = "true"
        return out


def _class_devices(host: HostRoot, cls: str, keys: tuple[str, ...]) -> list[Instance]:
    base = host.sys / "class" / cls
    out: list[Instance] = []
    for name in list_dir(base):
        inst: Instance = {"name": name}
        parent = link_name(base / name / "device")
        if parent:
            inst["parent"] = parent
        for key in keys:
            v = read_line(base / name / key)
            if v:
                inst[key if key != "name" else "manager"] = v
        out.append(inst)
    return out


def _dfl_devices(host: HostRoot) -> list[Instance]:
    base = host.sys / "bus" / "dfl" / "devices"
    out: list[Instance] = []
    for name in list_dir(base):
        inst: Instance = {"name": name}
        for key in ("type", "feature_id"):
            v = read_line(base / name / key)
            if v:
                inst[key] = v
        driver = link_name(base / name / "driver")
        if driver:
            inst["driver"] = driver
        out.append(inst)
    return out
