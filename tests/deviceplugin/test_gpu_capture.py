"""The NVIDIA device plugin on real GPU nodes (one H100, one H200), replayed: over the
host files and the NVML snapshot captured there (``tests/fixtures/capture_gpu.py``), kubelet sees the same
registration, devices and Allocate answer as the real node gave, and every device node
that answer names existed on that node."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from kubelet_standin import KubeletStandIn

from nfd.deviceplugin.manager import Manager
from nfd.devices.kinds import KindRegistry
from nfd.devices.kinds.gpu import GpuKind
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.hw.nvml_fake import FakeNvml, snapshot_from_dict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("node", ["h100-vm", "h200-vm"])
def test_kubelet_sees_what_the_real_node_served(
    node: str, kubelet: KubeletStandIn, start_plugin: Callable[..., Manager]
) -> None:
    capture = FIXTURES / "gpu-capture" / node
    real = json.loads((capture / "deviceplugin.json").read_text())
    snap = snapshot_from_dict(json.loads((capture / "nvml.json").read_text())["snapshot"])
    kind = GpuKind(nvml=lambda: FakeNvml(snap), event_wait=0.02)
    start_plugin(
        {"resources": [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}}]},
        kinds=KindRegistry((kind,)),
        host=HostRoot.under(FIXTURES / "hosts" / f"gpu-{node}"),
        features=Features(),
    )
    req = kubelet.registered()
    assert MessageToDict(req) == real["register"]
    with kubelet.client(req.endpoint) as client:
        assert MessageToDict(client.options()) == real["options"]
        watch = client.watch()
        first = watch.raw.get(timeout=5)
        # No NUMA node in that VM (numa_node -1): no topology, as the real node sent.
        assert MessageToDict(first) == real["list_and_watch"]
        ids = [d.ID for d in first.devices]
        assert MessageToDict(client.allocate(ids[:1])) == real["allocate"]
        assert client.preferred(ids, [], 1) == real["preferred_1"]
        watch.cancel()
    assert real["allocate_paths_exist"] and all(real["allocate_paths_exist"].values())
