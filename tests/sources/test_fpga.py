"""The fpga source over fixture trees: an Intel PAC Arria 10 on dfl-pci, a Xilinx Alveo."""

from __future__ import annotations

from pathlib import Path

from nfd.config import SourcesConfig, WorkerConfig
from nfd.hostroot import HostRoot
from nfd.labels import node_labels
from nfd.sources import default_registry
from nfd.sources.fpga import FpgaSource

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def test_intel_pac_arria10_with_dfl() -> None:
    src = FpgaSource()
    feats = src.discover(HostRoot.under(HOSTS / "fpga-arria10"), SourcesConfig())
    # The Intel NPU next to it is class 1200 too, but no FPGA.
    assert feats.instances["fpga.device"] == [
        {
            "pci_address": "0000:3b:00.0",
            "class": "1200",
            "vendor": "8086",
            "device": "09c4",
            "subsystem_vendor": "8086",
            "subsystem_device": "0000",
            "driver": "dfl-pci",
            "numa_node": "0",
            "fpga_vendor": "intel",
            "card": "pac-arria10",
            "sriov_totalvfs": "1",
            "sriov_numvfs": "0",
        }
    ]
    assert feats.instances["fpga.region"] == [
        {"name": "region0", "parent": "0000:3b:00.0", "compat_id": "f3c9941350195d23a0a83ebe86d2b6a8"}
    ]
    assert feats.instances["fpga.manager"] == [
        {"name": "fpga0", "parent": "0000:3b:00.0", "manager": "DFL FME FPGA Manager", "state": "operating"}
    ]
    assert feats.instances["fpga.dfl"] == [
        {"name": "dfl_dev.0", "type": "0x0", "feature_id": "0x9", "driver": "dfl-fme"},
        {"name": "dfl_dev.1", "type": "0x1", "feature_id": "0x0", "driver": "dfl-afu"},
    ]
    assert src.labels(feats, SourcesConfig()) == {
        "device.present": "true",
        "device.count": "1",
        "intel.present": "true",
        "intel.count": "1",
        "region.present": "true",
        "dfl.present": "true",
    }


def test_xilinx_alveo_next_to_an_amd_gpu() -> None:
    src = FpgaSource()
    feats = src.discover(HostRoot.under(HOSTS / "fpga-alveo"), SourcesConfig())
    devices = feats.instances["fpga.device"]
    # Both functions of the card (management and user); the MI300X (1002, class 1200) is left out.
    assert [(d["pci_address"], d["driver"], d["fpga_vendor"]) for d in devices] == [
        ("0000:af:00.0", "xclmgmt", "xilinx"),
        ("0000:af:00.1", "xocl", "xilinx"),
    ]
    assert all(d["numa_node"] == "1" for d in devices)
    assert "fpga.region" not in feats.instances
    labels = node_labels([src], feats, WorkerConfig()).labels
    assert labels == {
        "feature.node.kubernetes.io/fpga-device.present": "true",
        "feature.node.kubernetes.io/fpga-device.count": "2",
        "feature.node.kubernetes.io/fpga-xilinx.present": "true",
        "feature.node.kubernetes.io/fpga-xilinx.count": "2",
    }


def test_gpu_hosts_have_no_fpga() -> None:
    src = FpgaSource()
    for name in ("gpu-h100x8", "gpu-amd-mi300", "gpu-intel-flex"):
        feats = src.discover(HostRoot.under(HOSTS / name), SourcesConfig())
        assert feats.domains() == set(), name
        assert src.labels(feats, SourcesConfig()) == {}


def test_an_empty_host_is_fine(tmp_path: Path) -> None:
    src = FpgaSource()
    feats = src.discover(HostRoot.under(tmp_path), SourcesConfig())
    assert feats.names() == set()
    assert src.labels(feats, SourcesConfig()) == {}


def test_registered_after_gpu() -> None:
    names = default_registry().names()
    assert names.index("fpga") == names.index("gpu") + 1
