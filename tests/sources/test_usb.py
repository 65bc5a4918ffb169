"""The usb source on fixture trees and on this machine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nfd.config import SourcesConfig, UsbConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.sources.usb import UsbSource

SRC = UsbSource()


def test_devices_and_interfaces(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("fpga-pac"), cfg)
    blaster = {
        "address": "1-3", "busnum": "1", "devnum": "2", "class": "ff", "vendor": "09fb",
        "device": "6010", "serial": "USB-BlasterII-0001",
    }  # fmt: skip
    assert f == Features(
        instances={
            "usb.device": [
                # device class 00: one instance per interface, with the interface's class
                blaster,
                blaster,
                {"address": "1-4", "busnum": "1", "devnum": "3", "class": "ef", "vendor": "046d", "device": "0825"},
                {"address": "usb1", "busnum": "1", "devnum": "1", "class": "09", "vendor": "1d6b",
                 "device": "0002", "serial": "0000:00:14.0"},
            ]
        }
    )  # fmt: skip
    assert SRC.labels(f, cfg) == {"ff_09fb_6010.present": "true", "ef_046d_0825.present": "true"}


def test_label_fields(host: Callable[[str], HostRoot]) -> None:
    cfg = SourcesConfig(
        usb=UsbConfig(device_class_whitelist=("09",), device_label_fields=("serial", "vendor"))
    )
    f = SRC.discover(host("fpga-pac"), cfg)
    assert SRC.labels(f, cfg) == {"1d6b_0000:00:14.0.present": "true"}


def test_no_usb_bus_gives_empty_list(tmp_path: Path, cfg: SourcesConfig) -> None:
    # upstream globs, so a machine without USB has an empty usb.device
    assert SRC.discover(HostRoot.under(tmp_path), cfg) == Features(instances={"usb.device": []})


def test_live_machine(cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot(), cfg)
    for d in f.instances["usb.device"]:
        assert d["address"] and len(d.get("vendor", "0000")) == 4
    assert all(n.endswith(".present") for n in SRC.labels(f, cfg))
