"""The storage source on fixture trees, on bad input and on this machine."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nfd.config import SourcesConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.sources.storage import StorageSource

SRC = StorageSource()


def test_mixed_disks(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("numa-2s"), cfg)
    q = {"dax": "0", "nr_zones": "0", "zoned": "none"}
    assert f == Features(
        instances={
            "storage.block": [
                {"name": "nvme0n1", "rotational": "0", "size": "3125627568", **q},
                {"name": "pmem0", "rotational": "0", "size": "264241152", **q},
                {"name": "sda", "rotational": "1", "size": "1172123568", **q},
            ]
        }
    )
    assert SRC.labels(f, cfg) == {"nonrotationaldisk": "true"}


def test_only_spinning_disks(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("fpga-pac"), cfg)
    assert [d["name"] for d in f.instances["storage.block"]] == ["sda"]
    assert SRC.labels(f, cfg) == {}


def test_unreadable_attribute(
    host_copy: Callable[[str], Path], cfg: SourcesConfig, caplog: pytest.LogCaptureFixture
) -> None:
    root = host_copy("numa-2s")
    q = root / "sys/devices/pci0000:00/0000:d8:00.0/nvme/nvme0/block/nvme0n1/queue"
    os.remove(q / "rotational")
    (q / "rotational").mkdir()
    with caplog.at_level(logging.WARNING):
        f = SRC.discover(HostRoot.under(root), cfg)
    assert "rotational" not in f.instances["storage.block"][0]
    assert f.instances["storage.block"][1]["rotational"] == "0"  # pmem0 still counts
    assert SRC.labels(f, cfg) == {"nonrotationaldisk": "true"}
    assert any("rotational" in r.getMessage() for r in caplog.records)


def test_live_machine(cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot(), cfg)
    blocks = f.instances["storage.block"]
    assert {b["name"] for b in blocks} == set(os.listdir("/sys/block"))
    assert all(b.get("rotational") in ("0", "1", None) for b in blocks)
    assert (SRC.labels(f, cfg) == {"nonrotationaldisk": "true"}) == any(
        b.get("rotational") == "0" for b in blocks
    )
