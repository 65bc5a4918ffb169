"""NVIDIA GPUs served to a kubelet stand-in over real gRPC on unix sockets: registration,
ListAndWatch with NUMA topology, Allocate, and health that goes Unhealthy on an XID and
Healthy again when NVML answers (fake NVML, fixture host)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from kubelet_standin import KubeletStandIn

from nfd.deviceplugin.manager import Manager
from nfd.devices.kinds import KindRegistry
from nfd.devices.kinds.gpu import GpuKind
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.hw.nvml import XidEvent
from nfd.hw.nvml_fake import FakeNvml, h100x8

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def test_gpus_through_kubelet(kubelet: KubeletStandIn, start_plugin: Callable[..., Manager]) -> None:
    snap = h100x8()
    fake = FakeNvml(snap)
    kind = GpuKind(nvml=lambda: fake, event_wait=0.02)
    # recoverAfter/checkInterval 0: every health poll asks NVML, so recovery shows at once.
    config = {
        "resources": [
            {"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia", "recoverAfter": 0, "checkInterval": 0}}
        ]
    }
    start_plugin(
        config, kinds=KindRegistry((kind,)), host=HostRoot.under(HOSTS / "gpu-h100x8"), features=Features()
    )
    # The fixture stops the plugin, which also closes the kind (NVML and its event thread).
    req = kubelet.registered()
    assert req.resource_name == "nvidia.com/gpu"
    uuids = [g.uuid for g in snap.gpus]
    with kubelet.client(req.endpoint) as client:
        watch = client.watch()
        _, first = watch.until(lambda s: len(s) == 8)
        assert first == dict.fromkeys(uuids, "Healthy")
        msg = watch.raw.get(timeout=5)
        numa = {d.ID: [n.ID for n in d.topology.nodes] for d in msg.devices}
        assert numa[uuids[0]] == [0] and numa[uuids[7]] == [1]

        sick = uuids[2]
        fake.break_gpu(sick, "GPU is lost")
        fake.push_event(XidEvent(uuid=sick, xid=79))
        watch.until(lambda s: s.get(sick) == "Unhealthy")
        with pytest.raises(grpc.RpcError) as e:
            client.allocate([sick])
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION

        resp = client.allocate([uuids[0], uuids[1]]).container_responses[0]
        assert resp.envs["NVIDIA_VISIBLE_DEVICES"] == f"{uuids[0]},{uuids[1]}"
        assert [d.host_path for d in resp.devices] == [
            "/dev/nvidia0",
            "/dev/nvidiactl",
            "/dev/nvidia-uvm",
            "/dev/nvidia-uvm-tools",
            "/dev/nvidia1",
        ]

        fake.repair_gpu(sick)  # the GPU was reset: NVML answers again
        _, healed = watch.until(lambda s: s.get(sick) == "Healthy")
        assert set(healed.values()) == {"Healthy"}
        watch.cancel()
