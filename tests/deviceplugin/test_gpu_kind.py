"""The gpu device kind: NVIDIA GPUs and MIG devices through a fake NVML, AMD and Intel
GPUs from DRM fixture trees, health from XID events and NVML checks."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nfd.devices.config import parse_config
from nfd.devices.inventory import ResourceState, build_states
from nfd.devices.kinds import KindRegistry
from nfd.devices.kinds.gpu import GpuKind
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.hw.nvml import NO_INSTANCE, XidEvent
from nfd.hw.nvml_fake import FakeNvml, a100_mig, h100x8
from nfd.settings import ConfigError

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
REPO = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def states(
    resources: list[dict[str, Any]],
    host: str | Path,
    nvml: FakeNvml | None = None,
    clock: Clock | None = None,
) -> tuple[list[ResourceState], list[str], GpuKind]:
    kind = GpuKind(nvml=(lambda: nvml) if nvml is not None else None, clock=clock or Clock(), event_wait=0.02)
    cfg = parse_config({"resources": resources}, KindRegistry((kind,)))
    root = host if isinstance(host, Path) else HOSTS / host
    got, warnings = build_states(cfg.resources, features=Features(), host=HostRoot.under(root))
    return got, warnings, kind


def health(state: ResourceState) -> dict[str, bool]:
    return {d.id: d.healthy for d in state.snapshot()[1]}


def test_h100_gpus_with_device_nodes_numa_and_env() -> None:
    snap = h100x8()
    (gpu,), warnings, kind = states(
        [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}}], "gpu-h100x8", FakeNvml(snap)
    )
    uuids = [g.uuid for g in snap.gpus]
    assert warnings == []
    assert gpu.physical_ids == uuids
    statuses = gpu.snapshot()[1]
    assert [s.numa_node for s in statuses] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert all(s.healthy for s in statuses)
    edits = gpu.allocate([uuids[0], uuids[5]])
    assert edits.envs == {"NVIDIA_VISIBLE_DEVICES": f"{uuids[0]},{uuids[5]}"}
    assert [n.host_path for n in edits.devices] == [
        "/dev/nvidia0",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia5",
    ]
    kind.close()


def test_cdi_names_are_nvidia_style() -> None:
    snap = h100x8()
    (gpu,), _, kind = states(
        [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}, "cdi": True}], "gpu-h100x8", FakeNvml(snap)
    )
    edits = gpu.allocate([snap.gpus[2].uuid])
    assert edits.cdi_devices == [f"nvidia.com/gpu={snap.gpus[2].uuid}"]
    assert edits.envs == {"NVIDIA_VISIBLE_DEVICES": snap.gpus[2].uuid}
    kind.close()


def test_replicas_share_each_gpu() -> None:
    snap = h100x8()
    (gpu,), _, kind = states(
        [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}, "replicas": 4}], "gpu-h100x8", FakeNvml(snap)
    )
    ids = [d.id for d in gpu.snapshot()[1]]
    assert len(ids) == 32
    assert ids[:4] == [f"{snap.gpus[0].uuid}::{n}" for n in range(4)]
    # Two replicas of one GPU are one GPU to the container.
    assert gpu.allocate(ids[:2]).envs == {"NVIDIA_VISIBLE_DEVICES": snap.gpus[0].uuid}
    kind.close()


def test_xid_marks_a_gpu_unhealthy_and_it_recovers_when_nvml_answers() -> None:
    snap, clock = h100x8(), Clock()
    fake = FakeNvml(snap)
    (gpu,), _, kind = states(
        [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia", "recoverAfter": 60, "checkInterval": 10}}],
        "gpu-h100x8",
        fake,
        clock,
    )
    sick = snap.gpus[3].uuid
    kind.on_xid(XidEvent(uuid=sick, xid=13))  # an application error: ignored
    gpu.refresh()
    assert all(health(gpu).values())

    kind.on_xid(XidEvent(uuid=sick, xid=79))  # fallen off the bus
    fake.break_gpu(sick, "GPU is lost")
    gpu.refresh()
    h = health(gpu)
    assert h[sick] is False and sum(h.values()) == 7
    assert gpu.reasons()[3] == "XID 79"

    clock.now += 61  # quiet period over, but NVML still cannot reach it
    gpu.refresh()
    assert health(gpu)[sick] is False
    assert gpu.reasons()[3] == "NVML: GPU is lost"

    fake.repair_gpu(sick)  # reset by an admin
    clock.now += 10
    gpu.refresh()
    assert all(health(gpu).values())
    kind.close()


def test_a_gpu_lost_without_an_event_is_caught_by_the_periodic_check() -> None:
    snap, clock = h100x8(), Clock()
    fake = FakeNvml(snap)
    (gpu,), _, kind = states(
        [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia", "checkInterval": 5}}],
        "gpu-h100x8",
        fake,
        clock,
    )
    fake.break_gpu(snap.gpus[0].uuid, "GPU is lost")
    gpu.refresh()
    assert health(gpu)[snap.gpus[0].uuid] is True  # not due yet: checks are rate-limited
    clock.now += 5
    gpu.refresh()
    assert health(gpu)[snap.gpus[0].uuid] is False
    with pytest.raises(Exception, match="unhealthy"):
        gpu.allocate([snap.gpus[0].uuid])
    kind.close()


def test_events_arrive_through_the_watch_thread() -> None:
    snap = h100x8()
    fake = FakeNvml(snap)
    (gpu,), _, kind = states([{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}}], "gpu-h100x8", fake)
    assert fake.watched == {g.uuid for g in snap.gpus}
    fake.push_event(XidEvent(uuid=snap.gpus[6].uuid, xid=48))
    deadline = time.monotonic() + 10
    while health(gpu)[snap.gpus[6].uuid] and time.monotonic() < deadline:
        time.sleep(0.01)
        gpu.refresh()
    assert gpu.reasons()[6] == "XID 48"
    kind.close()


def test_mig_devices_as_their_own_resources() -> None:
    snap, clock = a100_mig(), Clock()
    resources = [
        {"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}},
        {
            "name": "nvidia.com/mig-1g.10gb",
            "gpu": {"vendor": "nvidia", "migProfile": "1g.10gb", "recoverAfter": 0},
        },
        {
            "name": "nvidia.com/mig-3g.40gb",
            "gpu": {"vendor": "nvidia", "migProfile": "3g.40gb"},
            # A CDI class has no dots: MIG devices go by nvidia.com/gpu=MIG-..., as NVIDIA's CDI specs name them.
            "cdi": {"kind": "nvidia.com/gpu"},
        },
    ]
    (full, small, big), warnings, kind = states(resources, "gpu-a100-mig", FakeNvml(snap), clock)
    # Both GPUs have MIG on: no full GPU to hand out.
    assert full.physical_ids == []
    assert any("nvidia.com/gpu" in w for w in warnings)
    assert len(small.physical_ids) == 11 and all(i.startswith("MIG-") for i in small.physical_ids)
    (big_id,) = big.physical_ids
    assert big.snapshot()[1][0].numa_node == 0
    nodes = [n.host_path for _, d in big.devices() for n in d.device_nodes]
    # GPU 0's 3g instance is GI 1, CI 0: its capability nodes come from /proc.
    assert nodes == [
        "/dev/nvidia0",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidia-caps/nvidia-cap12",
        "/dev/nvidia-caps/nvidia-cap13",
    ]
    assert big.allocate([big_id]).cdi_devices == [f"nvidia.com/gpu={big_id}"]

    # An XID naming one MIG device (GPU 1, GI 9, CI 0) hits only that device.
    gpu1 = snap.gpus[1]
    target = next(m.uuid for m in gpu1.mig_devices if m.gpu_instance_id == 9)
    kind.on_xid(XidEvent(uuid=gpu1.uuid, xid=94, gpu_instance_id=9, compute_instance_id=0))
    small.refresh()
    assert [i for i, ok in health(small).items() if not ok] == [target]
    # One without an instance hits every MIG device of the GPU.
    kind.on_xid(
        XidEvent(uuid=snap.gpus[0].uuid, xid=79, gpu_instance_id=NO_INSTANCE, compute_instance_id=NO_INSTANCE)
    )
    small.refresh()
    big.refresh()
    assert sum(not ok for ok in health(small).values()) == 5  # 4 on GPU 0 + the one on GPU 1
    assert health(big) == {big_id: False}
    # recoverAfter 0 on the 1g resource: the next due check brings them back.
    clock.now += 10
    small.refresh()
    assert all(health(small).values())
    kind.close()


def test_without_nvml_nothing_is_served_and_one_line_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml(unavailable="NVML cannot start: Driver Not Loaded")
    resources = [
        {"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}},
        {"name": "nvidia.com/mig-1g.10gb", "gpu": {"vendor": "nvidia", "migProfile": "1g.10gb"}},
    ]
    with caplog.at_level(logging.WARNING, logger="nfd.deviceplugin"):
        got, warnings, kind = states(resources, "gpu-h100x8", fake)
    assert [s.physical_ids for s in got] == [[], []]
    assert sum("Driver Not Loaded" in r.getMessage() for r in caplog.records) == 1
    assert len(warnings) == 2
    kind.close()


def test_intel_flex_cards() -> None:
    (flex,), warnings, _ = states(
        [{"name": "gpu.intel.com/i915", "gpu": {"vendor": "intel", "driver": "i915"}}], "gpu-intel-flex"
    )
    assert warnings == []
    assert flex.physical_ids == ["0000:4d:00.0", "0000:ca:00.0"]
    assert [s.numa_node for s in flex.snapshot()[1]] == [0, 1]
    edits = flex.allocate(["0000:ca:00.0"])
    assert [(n.host_path, n.permissions) for n in edits.devices] == [
        ("/dev/dri/card2", "rw"),
        ("/dev/dri/renderD129", "rw"),
    ]


def test_intel_xe_and_i915_split_by_driver() -> None:
    resources = [
        {"name": "gpu.intel.com/xe", "gpu": {"vendor": "intel", "driver": "xe"}},
        {"name": "gpu.intel.com/i915", "gpu": {"vendor": "intel", "driver": "i915"}},
    ]
    (xe, i915), _, _ = states(resources, "gpu-intel-arc")
    assert xe.physical_ids == ["0000:03:00.0"] and i915.physical_ids == ["0000:00:02.0"]


def test_amd_cards_get_kfd_and_go_unhealthy_when_unbound(tmp_path: Path) -> None:
    root = tmp_path / "host"
    shutil.copytree(HOSTS / "gpu-amd-mi300", root, symlinks=True)
    (amd,), _, _ = states(
        [{"name": "amd.com/gpu", "gpu": {"vendor": "amd"}, "env": {"GPU_CARD": "{card}"}}], root
    )
    assert amd.physical_ids == ["0000:1b:00.0", "0000:9d:00.0"]
    edits = amd.allocate(amd.physical_ids)
    assert [n.host_path for n in edits.devices] == [
        "/dev/dri/card1",
        "/dev/dri/renderD128",
        "/dev/kfd",
        "/dev/dri/card2",
        "/dev/dri/renderD129",
    ]
    assert edits.envs == {"GPU_CARD": "card1,card2"}
    (root / "sys/bus/pci/devices/0000:9d:00.0/driver").unlink()
    amd.refresh()
    assert health(amd) == {"0000:1b:00.0": True, "0000:9d:00.0": False}
    assert amd.reasons()[1] == "driver amdgpu unbound"


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({}, "empty selector"),
        ({"driver": "i915"}, "vendor: required"),
        ({"vendor": "matrox"}, "vendor: required"),
        ({"vendor": "amd", "migProfile": "1g.10gb"}, "MIG devices are NVIDIA's"),
        ({"vendor": "nvidia", "migProfile": "big"}, "not a MIG profile"),
        ({"vendor": "nvidia", "migProfile": "1g.10gb+"}, "not a MIG profile"),
        ({"vendor": "nvidia", "recoverAfter": "soon"}, "recoverAfter"),
        ({"vendor": "nvidia", "ignoreXids": ["79"]}, "ignoreXids"),
        ({"vendor": "nvidia", "ignoreXids": 79}, "ignoreXids: expected a list"),
        ({"vendor": "nvidia", "ignoreXids": {79: True}}, "ignoreXids: expected a list"),
        ({"vendor": "intel", "checkInterval": 5}, "vendor nvidia only"),
        ({"vendor": "nvidia", "colour": "green"}, "unknown selector key"),
    ],
)
def test_selector_errors_name_the_key(selector: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        parse_config(
            {"resources": [{"name": "example.com/gpu", "gpu": selector}]}, KindRegistry((GpuKind(),))
        )
    assert str(e.value).startswith("resources[0].gpu")


def test_cli_check_lists_amd_gpus(tmp_path: Path) -> None:
    cfg = tmp_path / "dp.yaml"
    cfg.write_text("resources:\n  - name: amd.com/gpu\n    gpu: {vendor: amd}\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nfd",
            "device-plugin",
            "--config",
            str(cfg),
            "--host-root",
            str(HOSTS / "gpu-amd-mi300"),
            "--check",
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "amd.com/gpu: 2 device(s), 2 of 2 allocatable" in proc.stdout
    assert "0000:9d:00.0  Healthy  numa=1  nodes=/dev/dri/card2,/dev/dri/renderD129,/dev/kfd" in proc.stdout


def test_the_event_thread_stops_when_nobody_asks_and_comes_back() -> None:
    snap = h100x8()
    fake = FakeNvml(snap)
    kind = GpuKind(nvml=lambda: fake, event_wait=0.01, idle_stop=0.05)
    cfg = parse_config(
        {"resources": [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}}]}, KindRegistry((kind,))
    )
    (gpu,), _ = build_states(cfg.resources, features=Features(), host=HostRoot.under(HOSTS / "gpu-h100x8"))
    first = kind._watcher
    assert first is not None
    first.join(timeout=10)  # a one-off look: the thread goes away by itself
    assert not first.is_alive()
    assert fake.closed >= 1
    watches = fake.calls.count("watch")
    kind.idle_stop = 60.0  # from here on the thread must outlive a slow test machine
    gpu.refresh()  # health asked again: events again
    assert kind._watcher is not None and kind._watcher is not first and kind._watcher.is_alive()
    assert fake.calls.count("watch") == watches + 1
    kind.close()
    assert not kind._watcher.is_alive()


def test_no_nvidia_gpu_on_pci_means_nvml_is_not_asked() -> None:
    fake = FakeNvml(h100x8())
    (gpu,), warnings, kind = states(
        [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia"}}], "gpu-amd-mi300", fake
    )
    assert warnings == ["resources[0]: nvidia.com/gpu: no device matches gpu vendor=nvidia; not served"]
    assert gpu.physical_ids == []
    assert fake.calls == []
    assert kind._watcher is None


@pytest.mark.parametrize(
    "profile", ["1g.10gb", "1c.3g.40gb", "1g.10gb+me", "1g.20gb-me", "2g.20gb+me.all", "1g.24gb+gfx", "*"]
)
def test_mig_profile_names_accepted(profile: str) -> None:
    cfg = parse_config(
        {"resources": [{"name": "nvidia.com/gpu", "gpu": {"vendor": "nvidia", "migProfile": profile}}]},
        KindRegistry((GpuKind(),)),
    )
    assert cfg.resources[0].selector.mig_profiles == (profile,)
