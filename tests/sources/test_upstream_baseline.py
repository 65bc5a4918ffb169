"""On the captured tree of the machine upstream nfd-worker v0.19 ran on, our sources give
upstream's labels and features (cpu excluded: it reads CPUID, not files)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from nfd.config import WorkerConfig
from nfd.discovery import discover
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.labels import node_labels
from nfd.sources import FeatureSource, default_registry

DATA = Path(__file__).resolve().parent / "data"
# Attributes we add on top of upstream's (documented in docs/sources.md).
OURS = {
    "pci.device": {"address", "driver", "numa_node"},
    "network.device": {"driver", "rdma_device", "rdma_capable", "rdma_available"},
    "storage.block": {"size"},
    "usb.device": {"address", "busnum", "devnum"},
}


def _ours() -> list[FeatureSource]:
    return [s for s in default_registry() if s.name not in ("cpu", "custom")]


def _run(host: HostRoot) -> tuple[Features, dict[str, str]]:
    cfg = WorkerConfig()
    result = discover(_ours(), host, cfg.sources)
    assert result.errors == {}
    return result.features, node_labels(_ours(), result.features, cfg).labels


def test_labels_equal_upstream(host: Callable[[str], HostRoot]) -> None:
    _, labels = _run(host("this-vm"))
    expected = dict(
        line.strip().split("=", 1)
        for line in (DATA / "upstream-v0.19-this-vm-labels.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    # the kernel's full version and revision are the captured kernel's: only present
    for k in ("kernel-version.full", "kernel-version.revision"):
        name = f"feature.node.kubernetes.io/{k}"
        assert labels.pop(name) and expected.pop(name)
    assert labels == expected


def test_features_equal_upstream(host: Callable[[str], HostRoot]) -> None:
    features, _ = _run(host("this-vm"))
    got = features.to_dict()
    upstream = json.loads((DATA / "upstream-v0.19-this-vm-features.json").read_text())
    kconfig = upstream.pop("kernel.config")
    mine = got["attributes"].pop("kernel.config")["elements"]
    assert len(mine) == kconfig["count"]
    assert {k: mine[k] for k in kconfig["sample"]} == kconfig["sample"]
    canon = json.dumps(mine, sort_keys=True, separators=(",", ":"))
    assert hashlib.sha256(canon.encode()).hexdigest() == kconfig["sha256"]
    for name, extra in OURS.items():
        for inst in got["instances"].get(name, {}).get("elements", []):
            for key in extra:
                inst["attributes"].pop(key, None)
    assert got == upstream


def test_nfd_discover_command_on_the_captured_tree(hosts: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NFD_") and k != "NODE_NAME"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "nfd",
            "discover",
            "--host-root",
            str(hosts / "this-vm"),
            "--sources",
            "all,-cpu",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    expected = [
        line
        for line in (DATA / "upstream-v0.19-this-vm-labels.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert sorted(out.splitlines()) == sorted(expected)
