"""The real NVML adapter, driven through a stand-in for the ``pynvml`` module: pynvml's own
error classes and constants, with the calls that would reach libnvidia-ml answered from
tables (there is no GPU here)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, ClassVar

import pynvml
import pytest

from nfd.hw.nvml import (
    EVENT_DOUBLE_BIT_ECC,
    EVENT_SINGLE_BIT_ECC,
    EVENT_XID_CRITICAL,
    NO_INSTANCE,
    NvmlError,
    NvmlUnavailable,
    XidEvent,
    mig_profile,
    sysfs_pci_address,
)
from nfd.hw.nvml_pynvml import PynvmlAdapter

MIB = 1024 * 1024


def err(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


@dataclass
class Dev:
    uuid: str
    name: Any
    bus: bytes
    memory: int
    cc: tuple[int, int] | None = None
    arch: int | None = None
    mig: tuple[int, int] | None = None  # (current, pending); None = not supported
    slots: list[Dev | None] = field(default_factory=list)
    attrs: dict[str, int] = field(default_factory=dict)
    gi: int = 0
    ci: int = 0
    lost: bool = False


class FakePynvml:
    NVMLError = pynvml.NVMLError

    def __init__(self, devices: list[Dev], *, init_error: int | None = None) -> None:
        self.devices = devices
        self.init_error = init_error
        self.events: list[Any] = []
        self.registered: dict[str, int] = {}
        self.shutdowns = 0
        self.inits = 0
        self.gi_profiles: dict[int, int] = {1: 9}  # GI id -> profile id
        self.made: dict[int, tuple[int, int, int]] = {}  # GI id -> (profile id, start, size)
        self.cis: dict[int, tuple[str, int]] = {}  # GI id -> its CI's MIG device UUID, CI profile
        self.gi_denied = False

    def _find(self, uuid: str) -> Dev:
        for d in self.devices:
            if d.uuid == uuid:
                return d
            for m in d.slots:
                if m is not None and m.uuid == uuid:
                    return m
        raise err(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise err(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Dev:
        return self.devices[i]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Dev:
        return self._find(uuid)

    def nvmlDeviceGetPciInfo(self, d: Dev) -> Any:
        return SimpleNamespace(busId=d.bus, pciDeviceId=0x20B210DE)

    def nvmlDeviceGetMemoryInfo(self, d: Dev) -> Any:
        if d.lost:
            raise err(pynvml.NVML_ERROR_GPU_IS_LOST)
        return SimpleNamespace(total=d.memory)

    def nvmlDeviceGetCudaComputeCapability(self, d: Dev) -> tuple[int, int]:
        if d.cc is None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return d.cc

    def nvmlDeviceGetArchitecture(self, d: Dev) -> int:
        if d.arch is None:
            raise err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return d.arch

    def nvmlDeviceGetMinorNumber(self, d: Dev) -> int:
        return self.devices.index(d)

    def nvmlDeviceGetMigMode(self, d: Dev) -> list[int]:
        if d.mig is None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return list(d.mig)

    def nvmlDeviceGetMaxMigDeviceCount(self, d: Dev) -> int:
        return len(d.slots)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, d: Dev, i: int) -> Dev:
        m = d.slots[i]
        if m is None:
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        return m

    def nvmlDeviceGetAttributes(self, m: Dev) -> Any:
        return SimpleNamespace(**m.attrs)

    def nvmlDeviceGetUUID(self, d: Dev) -> str:
        return d.uuid

    def nvmlDeviceGetName(self, d: Dev) -> Any:
        return d.name

    def nvmlDeviceGetGpuInstanceId(self, m: Dev) -> int:
        return m.gi

    def nvmlDeviceGetComputeInstanceId(self, m: Dev) -> int:
        return m.ci

    # GPU-instance profiles of the A100 80GB: 1g.10gb (id 19, seven placements of one
    # memory slice), 3g.40gb (id 9, two of four slices), 1g.10gb+me (id 20, one at a time).
    PROFILES: ClassVar[dict[int, dict[str, Any]]] = {
        0x0: {"id": 19, "sliceCount": 1, "instanceCount": 7, "memorySizeMB": 9728, "multiprocessorCount": 14,
              "copyEngineCount": 1, "decoderCount": 0, "jpegCount": 0, "ofaCount": 0, "places": (1, range(7))},
        0x2: {"id": 9, "sliceCount": 3, "instanceCount": 2, "memorySizeMB": 40192, "multiprocessorCount": 42,
              "copyEngineCount": 3, "decoderCount": 2, "jpegCount": 0, "ofaCount": 0, "places": (4, (0, 4))},
        0x7: {"id": 20, "sliceCount": 1, "instanceCount": 1, "memorySizeMB": 9728, "multiprocessorCount": 14,
              "copyEngineCount": 1, "decoderCount": 1, "jpegCount": 1, "ofaCount": 1, "places": (1, range(7))},
    }  # fmt: skip
    # Handles of GPU and compute instances are plain numbers here (the GPU-instance id).
    c_nvmlGpuInstancePlacement_t = pynvml.c_nvmlGpuInstancePlacement_t
    c_nvmlGpuInstance_t = ctypes.c_uint
    c_nvmlComputeInstance_t = ctypes.c_uint
    NVML_GPU_INSTANCE_PROFILE_COUNT = pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT
    NVML_COMPUTE_INSTANCE_PROFILE_COUNT = pynvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED

    def _profile(self, profile_id: int) -> dict[str, Any]:
        return next(p for p in self.PROFILES.values() if p["id"] == profile_id)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, d: Dev, kind: int) -> Any:
        if kind not in self.PROFILES:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(
            encoderCount=0, **{k: v for k, v in self.PROFILES[kind].items() if k != "places"}
        )

    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, d: Dev, profile_id: int, out: Any, count: Any
    ) -> int:
        size, starts = self._profile(profile_id)["places"]
        if out is not None and count._obj.value < len(starts):
            raise err(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
        for i, start in enumerate(starts if out is not None else ()):
            out[i].start, out[i].size = start, size
        count._obj.value = len(starts)
        return 0

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, d: Dev, profile_id: int, placement: Any) -> int:
        start, size = placement._obj.start, placement._obj.size
        taken = {s for _p, st, sz in self.made.values() for s in range(st, st + sz)}
        if taken & set(range(start, start + size)):
            raise err(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gi = 1 + max([m.gi for m in d.slots if m is not None] + list(self.made), default=0)
        self.made[gi] = (profile_id, start, size)
        self.gi_profiles[gi] = profile_id
        return gi

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi: int, kind: int, engines: int) -> Any:
        offered = {0x0: 1, 0x2: 3}  # compute-instance profile kind -> its slices
        if offered.get(kind, 99) > self._profile(self.made[gi][0])["sliceCount"]:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return SimpleNamespace(id=kind, sliceCount=offered[kind])

    def nvmlGpuInstanceCreateComputeInstance(self, gi: int, ci_profile: int) -> int:
        profile = self._profile(self.made[gi][0])
        a100 = self.devices[0]
        uuid = f"MIG-made-{gi}"
        a100.slots.append(
            mig(uuid, profile["sliceCount"], profile["memorySizeMB"], profile["multiprocessorCount"], gi)
        )
        self.cis[gi] = (uuid, ci_profile)
        return gi

    def nvmlComputeInstanceGetInfo(self, ci: int) -> Any:
        return SimpleNamespace(id=0)

    def nvmlDeviceGetGpuInstances(self, d: Dev, profile_id: int, out: Any, count: Any) -> int:
        mine = [gi for gi, (p, _s, _z) in self.made.items() if p == profile_id]
        for i, gi in enumerate(mine):
            out[i] = gi
        count._obj.value = len(mine)
        return 0

    def nvmlGpuInstanceGetComputeInstances(self, gi: int, ci_profile: int, out: Any, count: Any) -> int:
        have = int(gi in self.cis and self.cis[gi][1] == ci_profile)
        if have:
            out[0] = gi
        count._obj.value = have
        return 0

    def nvmlComputeInstanceDestroy(self, ci: int) -> None:
        uuid, _profile = self.cis.pop(ci)
        a100 = self.devices[0]
        a100.slots = [m for m in a100.slots if m is None or m.uuid != uuid]

    def nvmlGpuInstanceDestroy(self, gi: int) -> None:
        if gi in self.cis:
            raise err(pynvml.NVML_ERROR_IN_USE)
        del self.made[gi]

    def nvmlDeviceGetGpuInstanceById(self, d: Dev, gi: int) -> Any:
        if self.gi_denied:
            raise err(pynvml.NVML_ERROR_NO_PERMISSION)
        return gi

    def nvmlGpuInstanceGetInfo(self, gi: int) -> Any:
        _p, start, size = self.made.get(gi, (0, 0, 0))
        placement = SimpleNamespace(start=start, size=size)
        return SimpleNamespace(id=gi, profileId=self.gi_profiles.get(gi, 19), placement=placement)

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlEventSetFree(self, s: str) -> None:
        pass

    def nvmlDeviceGetSupportedEventTypes(self, d: Dev) -> int:
        return EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC  # no single-bit ECC on this one

    def nvmlDeviceRegisterEvents(self, d: Dev, mask: int, s: str) -> None:
        self.registered[d.uuid] = mask

    def nvmlEventSetWait_v2(self, s: str, timeout_ms: int) -> Any:
        if not self.events:
            raise err(pynvml.NVML_ERROR_TIMEOUT)
        return self.events.pop(0)


def mig(uuid: str, gi_slices: int, memory: int, sms: int, gi: int) -> Dev:
    attrs = {
        "gpuInstanceSliceCount": gi_slices,
        "computeInstanceSliceCount": gi_slices,
        "memorySizeMB": memory,
        "multiprocessorCount": sms,
        "sharedCopyEngineCount": gi_slices,
        "sharedDecoderCount": 0 if gi_slices == 1 else 2,
        "sharedEncoderCount": 0,
        "sharedJpegCount": 0,
        "sharedOfaCount": 0,
    }
    return Dev(uuid=uuid, name="", bus=b"", memory=memory * MIB, attrs=attrs, gi=gi)


def a100_and_t4() -> FakePynvml:
    a100 = Dev(
        uuid="GPU-a100",
        name="NVIDIA A100-SXM4-80GB",
        bus=b"00000000:07:00.0",
        memory=81920 * MIB,
        cc=(8, 0),
        arch=7,
        mig=(1, 1),
        slots=[mig("MIG-a", 3, 40192, 42, 1), None, mig("MIG-b", 1, 9728, 14, 7)],
    )
    # An older binding handing back bytes; a driver without the architecture call.
    t4 = Dev(uuid="GPU-t4", name=b"Tesla T4", bus=b"00000000:00:1E.0", memory=15360 * MIB, cc=(7, 5))
    return FakePynvml([a100, t4])


def test_snapshot_reads_gpus_and_mig_devices() -> None:
    nv = a100_and_t4()
    adapter = PynvmlAdapter(module=nv)
    snap = adapter.snapshot()
    assert (snap.driver_version, snap.cuda_driver_version, snap.cuda_version) == ("550.54.15", 12040, (12, 4))
    a100, t4 = snap.gpus
    assert (a100.name, a100.memory_mib, a100.compute, a100.architecture) == (
        "NVIDIA A100-SXM4-80GB",
        81920,
        (8, 0),
        7,
    )
    assert a100.sysfs_address == "0000:07:00.0"
    assert (a100.mig_capable, a100.mig_enabled) == (True, True)
    # The empty slot is skipped; profiles are named as NVIDIA names them.
    assert [(m.index, m.uuid, m.profile, m.gpu_instance_id) for m in a100.mig_devices] == [
        (0, "MIG-a", "3g.40gb", 1),
        (2, "MIG-b", "1g.10gb", 7),
    ]
    assert a100.mig_devices[0].decoders == 2 and a100.mig_devices[1].multiprocessors == 14
    assert (t4.name, t4.architecture, t4.mig_capable, t4.minor) == ("Tesla T4", None, False, 1)
    assert t4.sysfs_address == "0000:00:1e.0"
    adapter.close()
    adapter.close()
    assert nv.shutdowns == 1


def test_snapshot_reads_gpu_instance_profiles_and_placements() -> None:
    a100, t4 = PynvmlAdapter(module=a100_and_t4()).snapshot().gpus
    assert [(p.profile_id, p.name, p.instances, p.memory_mib) for p in a100.mig_profiles] == [
        (19, "1g.10gb", 7, 9728),
        (9, "3g.40gb", 2, 40192),
        (20, "1g.10gb+me", 1, 9728),
    ]
    three = a100.mig_profiles[1]
    assert [(x.start, x.size) for x in three.placements] == [(0, 4), (4, 4)]
    assert (three.multiprocessors, three.copy_engines, three.decoders) == (42, 3, 2)
    assert t4.mig_profiles == ()  # no MIG mode, no profiles


def test_create_and_destroy_a_mig_device_at_a_placement() -> None:
    nv = a100_and_t4()
    adapter = PynvmlAdapter(module=nv)
    made = adapter.create_mig("GPU-a100", 9, 4)
    assert (made.uuid, made.profile, made.gpu_instance_id, made.compute_instance_id) == (
        "MIG-made-8",
        "3g.40gb",
        8,
        0,
    )
    assert nv.made == {8: (9, 4, 4)} and nv.cis == {8: ("MIG-made-8", 0x2)}  # the CI spans the GI
    with pytest.raises(NvmlError, match="creating a MIG device"):
        adapter.create_mig("GPU-a100", 19, 5)  # inside the 3g instance's slices
    with pytest.raises(NvmlError, match="no placement at 3"):
        adapter.create_mig("GPU-a100", 9, 3)
    assert adapter.destroy_mig("GPU-a100", 9, 4) is True
    assert nv.made == {} and nv.cis == {}
    assert "MIG-made-8" not in [m.uuid for m in adapter.snapshot().gpus[0].mig_devices]
    assert adapter.destroy_mig("GPU-a100", 9, 4) is False


def test_media_extension_profiles_are_named_with_plus_me() -> None:
    nv = a100_and_t4()
    nv.gi_profiles[7] = 20  # GI 7 is a 1g+me instance
    a100 = PynvmlAdapter(module=nv).snapshot().gpus[0]
    assert [m.profile for m in a100.mig_devices] == ["3g.40gb", "1g.10gb+me"]
    # Not allowed to look at GPU instances: plain names rather than a failure.
    nv.gi_denied = True
    a100 = PynvmlAdapter(module=nv).snapshot().gpus[0]
    assert [m.profile for m in a100.mig_devices] == ["3g.40gb", "1g.10gb"]


def test_init_failures_are_unavailable_with_nvml_words() -> None:
    for code, words in (
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "Library Not Found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"),
    ):
        adapter = PynvmlAdapter(module=FakePynvml([], init_error=code))
        with pytest.raises(NvmlUnavailable, match=words):
            adapter.snapshot()


def test_a_gpu_failing_during_the_snapshot_is_an_nvml_error() -> None:
    nv = a100_and_t4()
    nv.devices[1].lost = True
    with pytest.raises(NvmlError, match="GPU is lost"):
        PynvmlAdapter(module=nv).snapshot()


def test_check_says_why_a_gpu_is_not_usable() -> None:
    nv = a100_and_t4()
    adapter = PynvmlAdapter(module=nv)
    assert adapter.check("GPU-a100") is None
    assert adapter.check("MIG-b") is None
    nv.devices[0].lost = True
    assert adapter.check("GPU-a100") == "GPU is lost"
    assert adapter.check("GPU-gone") == "Not Found"


def test_events() -> None:
    nv = a100_and_t4()
    adapter = PynvmlAdapter(module=nv)
    assert adapter.wait_event(0.01) is None  # nothing watched yet
    adapter.watch(["GPU-a100", "GPU-t4"])
    # Only the supported event types are asked for.
    assert nv.registered == {
        "GPU-a100": EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC,
        "GPU-t4": EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC,
    }
    assert EVENT_SINGLE_BIT_ECC not in set(nv.registered.values())
    assert adapter.wait_event(0.01) is None  # NVML's timeout
    a100 = nv.devices[0]
    nv.events = [
        SimpleNamespace(device=a100, eventType=EVENT_DOUBLE_BIT_ECC, eventData=0, gpuInstanceId=NO_INSTANCE, computeInstanceId=NO_INSTANCE),
        SimpleNamespace(device=a100, eventType=EVENT_XID_CRITICAL, eventData=79, gpuInstanceId=NO_INSTANCE, computeInstanceId=NO_INSTANCE),
        SimpleNamespace(device=a100, eventType=EVENT_XID_CRITICAL, eventData=48, gpuInstanceId=7, computeInstanceId=0),
    ]  # fmt: skip
    assert adapter.wait_event(0.01) is None  # not an XID event
    assert adapter.wait_event(0.01) == XidEvent(uuid="GPU-a100", xid=79)
    assert adapter.wait_event(0.01) == XidEvent(
        uuid="GPU-a100", xid=48, gpu_instance_id=7, compute_instance_id=0
    )


@pytest.mark.parametrize(
    ("gi", "ci", "mib", "parent_mib", "name"),
    [
        (1, 1, 9728, 81920, "1g.10gb"),  # A100 80GB
        (2, 2, 19968, 81920, "2g.20gb"),
        (3, 3, 40192, 81920, "3g.40gb"),
        (7, 7, 80896, 81920, "7g.80gb"),
        (1, 1, 4864, 40960, "1g.5gb"),  # A100 40GB
        (3, 1, 40192, 81920, "1c.3g.40gb"),  # a compute instance of one slice in a 3g instance
        (1, 1, 9984, 81559, "1g.10gb"),  # H100 80GB
        (1, 1, 20224, 81559, "1g.20gb"),
    ],
)
def test_mig_profile_names(gi: int, ci: int, mib: int, parent_mib: int, name: str) -> None:
    assert (
        mig_profile(gi_slices=gi, ci_slices=ci, memory_mib=mib, parent_memory_bytes=parent_mib * MIB) == name
    )


def test_sysfs_addresses() -> None:
    assert sysfs_pci_address("00000000:1E:00.0") == "0000:1e:00.0"
    assert sysfs_pci_address("0000:DB:00.0") == "0000:db:00.0"
    assert sysfs_pci_address("1E:00.0") == "0000:1e:00.0"


def test_no_binding_installed_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    with pytest.raises(NvmlUnavailable, match="nvidia-ml-py"):
        PynvmlAdapter().snapshot()
