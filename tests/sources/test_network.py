"""The network source on fixture trees, on bad input and on this machine."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nfd.config import SourcesConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.sources.network import NetworkSource

SRC = NetworkSource()


def test_sriov_and_rdma(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("sriov-nic"), cfg)
    assert f == Features(
        instances={
            "network.device": [
                {"name": "ens1f0np0", "operstate": "up", "speed": "100000", "mtu": "9000",
                 "sriov_numvfs": "2", "sriov_totalvfs": "8", "driver": "mlx5_core",
                 "rdma_device": "mlx5_0", "rdma_capable": "true", "rdma_available": "true"},
                {"name": "ens1f0v0", "operstate": "up", "speed": "100000", "mtu": "9000",
                 "driver": "mlx5_core", "rdma_device": "mlx5_2", "rdma_capable": "true",
                 "rdma_available": "true"},
                # link down: no speed
                {"name": "ens2f0", "operstate": "down", "mtu": "1500", "sriov_numvfs": "0",
                 "sriov_totalvfs": "128", "driver": "ice"},
            ],
            "network.virtual": [  # bonding_masters is not an interface
                {"name": "bond0", "operstate": "up", "mtu": "9000"},
                {"name": "lo", "operstate": "unknown", "mtu": "65536"},
            ],
        }
    )  # fmt: skip
    assert SRC.labels(f, cfg) == {"sriov.capable": "true", "sriov.configured": "true"}


def test_capable_but_not_configured(host_copy: Callable[[str], Path], cfg: SourcesConfig) -> None:
    root = host_copy("sriov-nic")
    (root / "sys/devices/pci0000:3a/0000:3b:00.0/sriov_numvfs").write_text("0\n")
    f = SRC.discover(HostRoot.under(root), cfg)
    assert SRC.labels(f, cfg) == {"sriov.capable": "true"}


def test_plain_cloud_nic(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("arm64-al2023"), cfg)
    assert f.instances["network.device"] == [
        {"name": "ens5", "operstate": "up", "speed": "-1", "mtu": "9001", "driver": "ena"}
    ]
    assert SRC.labels(f, cfg) == {}


def test_bad_values_and_unreadable_files(
    host_copy: Callable[[str], Path], cfg: SourcesConfig, caplog: pytest.LogCaptureFixture
) -> None:
    root = host_copy("sriov-nic")
    dev = root / "sys/devices/pci0000:3a/0000:3b:00.0"
    (dev / "sriov_totalvfs").write_text("lots\n")
    os.remove(dev / "sriov_numvfs")
    (dev / "sriov_numvfs").mkdir()
    with caplog.at_level(logging.WARNING):
        f = SRC.discover(HostRoot.under(root), cfg)
        labels = SRC.labels(f, cfg)
    first = f.instances["network.device"][0]
    assert first["sriov_totalvfs"] == "lots" and "sriov_numvfs" not in first
    assert labels == {"sriov.capable": "true"}  # from the E810, the other device still counts
    msgs = " ".join(r.getMessage() for r in caplog.records)
    assert "sriov_numvfs" in msgs and "lots" in msgs


def test_no_sysfs_net(tmp_path: Path, cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot.under(tmp_path), cfg)
    assert f == Features() and SRC.labels(f, cfg) == {}


def test_live_machine(cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot(), cfg)
    everything = f.instances["network.device"] + f.instances["network.virtual"]
    names = {i["name"] for i in everything}
    assert names == set(os.listdir("/sys/class/net")) - {"bonding_masters"}
    assert "lo" in {i["name"] for i in f.instances["network.virtual"]}
    for i in f.instances["network.device"]:
        assert os.path.exists(f"/sys/class/net/{i['name']}/device")
    assert set(SRC.labels(f, cfg)) <= {"sriov.capable", "sriov.configured"}
