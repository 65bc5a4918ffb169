"""The memory source on fixture trees, on bad input and on this machine."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nfd.config import SourcesConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.hw.hugepages import kib_quantity
from nfd.sources.memory import MemorySource

SRC = MemorySource()


def test_two_socket_box(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("numa-2s"), cfg)
    assert f == Features(
        attributes={
            "memory.numa": {"is_numa": "true", "node_count": "2"},
            "memory.swap": {"enabled": "true"},
            "memory.hugepages": {"enabled": "true", "hugepages-2Mi": "1024", "hugepages-1Gi": "4"},
        },
        instances={
            "memory.nv": [
                {"name": "dax0.0", "devtype": "nd_dax", "mode": "devdax"},
                {"name": "namespace0.0", "devtype": "nd_namespace_io", "mode": "fsdax"},
                {"name": "region0", "devtype": "nd_region"},
            ]
        },
    )
    assert SRC.labels(f, cfg) == {"numa": "true", "swap": "true", "nv.present": "true", "nv.dax": "true"}


def test_single_node_without_swap_or_hugepages(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("arm64-al2023"), cfg)
    assert f == Features(
        attributes={
            "memory.numa": {"is_numa": "false", "node_count": "1"},
            "memory.swap": {"enabled": "false"},
            "memory.hugepages": {"enabled": "false"},
        },
        instances={"memory.nv": []},
    )
    assert SRC.labels(f, cfg) == {}


def test_configured_but_unused_hugepages(host: Callable[[str], HostRoot], cfg: SourcesConfig) -> None:
    f = SRC.discover(host("gpu-a100"), cfg)
    assert f.attributes["memory.hugepages"] == {
        "enabled": "false",
        "hugepages-2Mi": "0",
        "hugepages-1Gi": "0",
    }
    assert SRC.labels(f, cfg) == {"numa": "true"}


def test_kib_quantity() -> None:
    assert [kib_quantity(n) for n in (64, 2048, 1048576, 16777216, 3000)] == [
        "64Ki",
        "2Mi",
        "1Gi",
        "16Gi",
        "3000Ki",
    ]


def test_unreadable_swaps_is_logged_and_rest_goes_on(
    host_copy: Callable[[str], Path], cfg: SourcesConfig, caplog: pytest.LogCaptureFixture
) -> None:
    root = host_copy("numa-2s")
    os.remove(root / "proc/swaps")
    (root / "proc/swaps").mkdir()
    with caplog.at_level(logging.WARNING):
        f = SRC.discover(HostRoot.under(root), cfg)
    assert "memory.swap" not in f.attributes
    assert f.attributes["memory.numa"]["node_count"] == "2"
    assert any("swaps" in r.getMessage() for r in caplog.records)
    assert SRC.labels(f, cfg) == {"numa": "true", "nv.present": "true", "nv.dax": "true"}


def test_empty_tree(tmp_path: Path, cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot.under(tmp_path), cfg)
    assert f == Features(attributes={"memory.hugepages": {"enabled": "false"}}, instances={"memory.nv": []})


def test_live_machine(cfg: SourcesConfig) -> None:
    f = SRC.discover(HostRoot(), cfg)
    numa = f.attributes["memory.numa"]
    assert int(numa["node_count"]) >= 1
    assert numa["is_numa"] == str(int(numa["node_count"]) > 1).lower()
    assert f.attributes["memory.swap"]["enabled"] in ("true", "false")
    assert set(SRC.labels(f, cfg)) <= {"numa", "swap", "nv.present", "nv.dax"}
