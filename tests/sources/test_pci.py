"""The pci source on fixture trees, on bad input and on this machine."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nfd.config import PciConfig, SourcesConfig
from nfd.hostroot import HostRoot
from nfd.sources.pci import PciSource

SRC = PciSource()


def a100(addr: str, node: str) -> dict[str, str]:
    return {
        "address": addr, "class": "0302", "vendor": "10de", "device": "20b0",
        "subsystem_vendor": "10de", "subsystem_device": "134f", "driver": "nvidia",
        "iommu_group/type": "DMA", "numa_node": node,
    }  # fmt: skip


def test_gpu_node(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("gpu-a100"), cfg)
    nvswitch = {
        "class": "0680", "vendor": "10de", "device": "1af1", "subsystem_vendor": "10de",
        "subsystem_device": "1643", "driver": "nvidia-nvswitch", "numa_node": "1",
    }  # fmt: skip
    assert f.instances["pci.device"] == [
        {"address": "0000:00:00.0", "class": "0600", "vendor": "1022", "device": "1480",
         "subsystem_vendor": "1022", "subsystem_device": "1480", "numa_node": "0"},
        a100("0000:07:00.0", "0"),
        a100("0000:0f:00.0", "0"),
        {"address": "0000:22:00.0", "class": "0108", "vendor": "144d", "device": "a824",
         "subsystem_vendor": "144d", "subsystem_device": "a801", "driver": "nvme", "numa_node": "0"},
        a100("0000:47:00.0", "1"),
        a100("0000:4e:00.0", "1"),
        {"address": "0000:c1:00.0", **nvswitch},
        {"address": "0000:c2:00.0", **nvswitch},
    ]  # fmt: skip
    assert SRC.labels(f, cfg) == {"0302_10de.present": "true"}


def test_label_fields_and_whitelist(host: Callable[[str], HostRoot]) -> None:
    cfg = SourcesConfig(
        pci=PciConfig(
            device_class_whitelist=("0302", "0680"), device_label_fields=("device", "vendor", "bogus")
        )
    )
    f = SRC.discover(host("gpu-a100"), cfg)
    # fields in upstream's order (vendor before device), unknown ones ignored
    assert SRC.labels(f, cfg) == {"10de_20b0.present": "true", "10de_1af1.present": "true"}
    only_bogus = SourcesConfig(pci=PciConfig(device_label_fields=("bogus",)))
    assert SRC.labels(f, only_bogus) == {"0302_10de.present": "true"}


def test_sriov_nics(host: Callable[[str], HostRoot]) -> None:
    f = SRC.discover(host("sriov-nic"), SourcesConfig())
    cx6 = f.instances["pci.device"][0]
    assert cx6 == {
        "address": "0000:3b:00.0", "class": "0200", "vendor": "15b3", "device": "101b",
        "subsystem_vendor": "15b3", "subsystem_device": "0007", "sriov_totalvfs": "8",
        "iommu_group/type": "DMA", "iommu/intel-iommu/version": "1:0", "driver": "mlx5_core",
        "numa_node": "0",
    }  # fmt: skip
    assert "sriov_totalvfs" not in f.instances["pci.device"][1]  # the VF
    assert f.instances["pci.device"][2]["sriov_totalvfs"] == "128"
    assert SRC.labels(f, SourcesConfig()) == {}  # class 02 is not whitelisted by default
    nics = SourcesConfig(pci=PciConfig(device_class_whitelist=("0200",)))
    assert SRC.labels(f, nics) == {
        "0200_15b3.present": "true",
        "0200_15b3.sriov.capable": "true",
        "0200_8086.present": "true",
        "0200_8086.sriov.capable": "true",
    }


def test_fpga_card(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("fpga-pac"), cfg)
    pac = [d for d in f.instances["pci.device"] if d["device"] == "09c4"]
    assert pac == [
        {
            "address": "0000:af:00.0", "class": "1200", "vendor": "8086", "device": "09c4",
            "subsystem_vendor": "8086", "subsystem_device": "0000", "driver": "dfl-pci",
            "iommu_group/type": "DMA", "iommu/intel-iommu/version": "1:0", "numa_node": "0",
        }
    ]  # fmt: skip
    assert SRC.labels(f, cfg) == {"1200_8086.present": "true"}


def test_device_missing_a_required_attribute_is_skipped(
    host_copy: Callable[[str], Path], cfg: SourcesConfig, caplog: pytest.LogCaptureFixture
) -> None:
    root = host_copy("gpu-a100")
    os.remove(root / "sys/devices/pci0000:00/0000:07:00.0/subsystem_vendor")
    dev = root / "sys/devices/pci0000:00/0000:0f:00.0"
    os.remove(dev / "numa_node")
    (dev / "numa_node").mkdir()  # unreadable: logged, attribute left out
    with caplog.at_level(logging.WARNING):
        f = SRC.discover(HostRoot.under(root), cfg)
    addrs = [d["address"] for d in f.instances["pci.device"]]
    assert "0000:07:00.0" not in addrs and len(addrs) == 7
    assert "numa_node" not in f.instances["pci.device"][1]
    msgs = " ".join(r.getMessage() for r in caplog.records)
    assert "0000:07:00.0" in msgs and "numa_node" in msgs


def test_no_pci_bus(tmp_path: Path, cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot.under(tmp_path), cfg)
    assert f.instances == {} and SRC.labels(f, cfg) == {}


def test_live_machine(cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot(), cfg)
    devices = f.instances.get("pci.device", [])
    assert len(devices) == len(os.listdir("/sys/bus/pci/devices"))
    for d in devices:
        assert len(d["class"]) == 4 and len(d["vendor"]) == 4 and len(d["device"]) == 4
        assert os.path.exists(f"/sys/bus/pci/devices/{d['address']}")
    for name in SRC.labels(f, cfg):
        assert name.endswith((".present", ".sriov.capable"))
