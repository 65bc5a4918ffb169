"""What nfd printed on real NVIDIA GPU nodes (VMs with one H100 or one H200), replayed:
the host files it read and its NVML snapshot, captured there by
``tests/fixtures/capture_gpu.py``, give the same raw features and labels here."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nfd.config import SourcesConfig, WorkerConfig
from nfd.discovery import discover
from nfd.hostroot import HostRoot
from nfd.hw.nvml import NvmlSnapshot
from nfd.hw.nvml_fake import FakeNvml, a100_40gb, a100_mig, h100x8, snapshot_from_dict, t4
from nfd.labels import node_labels
from nfd.sources import default_registry
from nfd.sources.gpu import GpuSource

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NODES = ["h100-vm", "h200-vm"]  # tests/fixtures/gpu-capture/<node>, hosts/gpu-<node>
PRODUCTS = {"h100-vm": ("NVIDIA-H100-80GB-HBM3", "81559"), "h200-vm": ("NVIDIA-H200", "143771")}


def host(node: str) -> HostRoot:
    return HostRoot.under(FIXTURES / "hosts" / f"gpu-{node}")


def captured(node: str, name: str) -> Any:
    return json.loads((FIXTURES / "gpu-capture" / node / name).read_text())


def nvml(node: str) -> Callable[[], FakeNvml]:
    snapshot = snapshot_from_dict(captured(node, "nvml.json")["snapshot"])
    return lambda: FakeNvml(snapshot)


@pytest.mark.parametrize("node", NODES)
def test_the_gpu_source_gives_what_it_gave_on_the_node(node: str) -> None:
    src = GpuSource(nvml=nvml(node))
    cfg = SourcesConfig()
    feats = src.discover(host(node), cfg)
    real = captured(node, "gpu-source.json")
    assert feats.to_dict() == real["features"]
    assert src.labels(feats, cfg) == real["labels"]
    product, memory = PRODUCTS[node]
    assert real["labels"]["nvidia.com/gpu.product"] == product
    assert real["labels"]["nvidia.com/gpu.memory"] == memory
    assert real["labels"]["nvidia.com/cuda.driver-version.full"] == "580.159.04"


@pytest.mark.parametrize("node", NODES)
def test_every_source_but_cpu_gives_the_nodes_features_and_labels(node: str) -> None:
    """CPUID is read from the running processor, not from files: the cpu source is the
    one that cannot be replayed."""
    sources = [
        GpuSource(nvml=nvml(node)) if s.name == "gpu" else s for s in default_registry() if s.name != "cpu"
    ]
    config = WorkerConfig()
    result = discover(sources, host(node), config.sources)
    assert result.errors == {}
    real = captured(node, "discover.json")["json"]
    got = result.features.to_dict()
    for kind in ("flags", "attributes", "instances"):
        want = {k: v for k, v in real["features"].get(kind, {}).items() if not k.startswith("cpu.")}
        assert got.get(kind, {}) == want, kind
    labels = node_labels(sources, result.features, config).labels
    assert labels == {k: v for k, v in real["labels"].items() if "/cpu-" not in k}
    assert labels["feature.node.kubernetes.io/pci-0302_10de.present"] == "true"


@pytest.mark.parametrize(
    "snapshot", [h100x8(), a100_mig(), a100_40gb(2), t4()], ids=["h100x8", "a100-mig", "a100-40gb", "t4"]
)
def test_a_snapshot_survives_the_capture_format(snapshot: NvmlSnapshot) -> None:
    assert snapshot_from_dict(json.loads(json.dumps(dataclasses.asdict(snapshot)))) == snapshot


@pytest.mark.parametrize("node", NODES)
def test_nvml_answered_the_health_probe_on_the_node(node: str) -> None:
    """What the device kinds' health relies on, as the real driver answered it: the GPU
    answers a query, XID events can be registered, and a wait with none times out."""
    real = captured(node, "nvml.json")
    [uuid] = [g["uuid"] for g in real["snapshot"]["gpus"]]
    assert real["probe"][uuid] == {"check": None}
    assert real["probe"]["watch"] == "ok"
    assert real["probe"]["wait_event"]["event"] is None
    # nvml.h: XID critical (0x8) and both ECC events are among the supported ones.
    assert real["pynvml"]["gpu0"]["supported_event_types"] & 0xB == 0xB
