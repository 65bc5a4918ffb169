"""A fixture host for device-plugin tests: sysfs and /dev trees in a tmp dir, and the
raw features that nfd's pci/usb sources would report for them."""

from __future__ import annotations

import os
from pathlib import Path

from nfd.features import Features
from nfd.hostroot import HostRoot

# address -> (vendor, device, class, driver, numa_node, iommu_group)
PCI = {
    "0000:3b:00.0": ("1172", "5052", "1200", "vfio-pci", "0", "12"),
    "0000:3c:00.0": ("1172", "5052", "1200", "vfio-pci", "0", "13"),
    "0000:af:00.0": ("1172", "5052", "1200", "vfio-pci", "1", "40"),
    "0000:b0:00.0": ("1172", "5052", "1200", "vfio-pci", "1", "41"),
    "0000:00:02.0": ("1234", "1111", "0300", "bochs-drm", "-1", "3"),
}
# port -> (vendor, product, busnum, devnum, serial)
USB = {"1-1.2": ("0403", "6001", "1", "5", "FT1"), "1-1.3": ("0403", "6001", "1", "6", "FT2")}


class FixtureHost:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = HostRoot.under(root)
        for addr, (_v, _d, _c, driver, numa, group) in PCI.items():
            self.add_pci(addr, driver=driver, numa=numa)
            self.touch(f"dev/vfio/{group}")
        self.touch("dev/vfio/vfio")
        for port, (_v, _p, bus, dev, _s) in USB.items():
            self.add_usb(port, bus, dev)
        for n in range(4):
            self.touch(f"dev/ttyS{n}")

    def touch(self, rel: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")
        return p

    def add_pci(self, addr: str, *, driver: str, numa: str) -> None:
        d = self.root / "sys/bus/pci/devices" / addr
        d.mkdir(parents=True, exist_ok=True)
        (d / "numa_node").write_text(numa + "\n")
        drv = self.root / "sys/bus/pci/drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        self.bind(addr, driver)

    def bind(self, addr: str, driver: str) -> None:
        link = self.root / "sys/bus/pci/devices" / addr / "driver"
        if link.is_symlink():
            link.unlink()
        os.symlink(f"../../drivers/{driver}", link)

    def unbind(self, addr: str) -> None:
        (self.root / "sys/bus/pci/devices" / addr / "driver").unlink()

    def add_usb(self, port: str, bus: str, dev: str) -> None:
        d = self.root / "sys/bus/usb/devices" / port
        d.mkdir(parents=True, exist_ok=True)
        (d / "busnum").write_text(bus + "\n")
        (d / "devnum").write_text(dev + "\n")
        self.touch(f"dev/bus/usb/{int(bus):03d}/{int(dev):03d}")

    def features(self) -> Features:
        f = Features()
        f.set_instances(
            "pci.device",
            [
                {
                    "address": a, "vendor": v, "device": d, "class": c, "driver": drv,
                    "numa_node": n, "iommu_group": g, "subsystem_vendor": v, "subsystem_device": "0001",
                }
                for a, (v, d, c, drv, n, g) in PCI.items()
            ],
        )  # fmt: skip
        f.set_instances(
            "usb.device",
            [
                {"address": p, "vendor": v, "device": d, "class": "ff", "serial": s, "busnum": b, "devnum": n}
                for p, (v, d, b, n, s) in USB.items()
            ],
        )
        return f
