"""A stand-in for NVML, for tests and for machines without a GPU.

It answers the :class:`nfd.hw.nvml.Nvml` protocol from a snapshot given up front;
tests push XID events and mark GPUs broken or usable again to drive health checks.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from nfd.hw.nvml import (
    GpuInfo,
    MigDeviceInfo,
    MigPlacement,
    MigProfileInfo,
    NvmlError,
    NvmlSnapshot,
    NvmlUnavailable,
    XidEvent,
    mig_profile,
)

MIB = 1024 * 1024


@dataclass
class FakeNvml:
    snapshot_value: NvmlSnapshot | None = None
    # Set to make every call fail as NVML does on a node without a driver.
    unavailable: str | None = None
    # uuid -> why the GPU (or MIG device) does not answer; absent = usable.
    broken: dict[str, str] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    watched: set[str] = field(default_factory=set)
    closed: int = 0
    # GPU UUID -> (profile id, placement) -> the MIG device create_mig made there.
    created: dict[str, dict[tuple[int, MigPlacement], MigDeviceInfo]] = field(default_factory=dict)
    _events: queue.Queue[XidEvent] = field(default_factory=queue.Queue, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _enter(self, call: str) -> None:
        with self._lock:
            self.calls.append(call)
        if self.unavailable is not None:
            raise NvmlUnavailable(self.unavailable)

    # -- the protocol -------------------------------------------------------------------
    def snapshot(self) -> NvmlSnapshot:
        self._enter("snapshot")
        assert self.snapshot_value is not None, "FakeNvml needs a snapshot"
        return self.snapshot_value

    def check(self, uuid: str) -> str | None:
        self._enter("check")
        with self._lock:
            return self.broken.get(uuid)

    def watch(self, uuids: Iterable[str]) -> None:
        self._enter("watch")
        with self._lock:
            self.watched.update(uuids)

    def wait_event(self, timeout_s: float) -> XidEvent | None:
        self._enter("wait_event")
        try:
            return (
                self._events.get(timeout=max(timeout_s, 0.0)) if timeout_s > 0 else self._events.get_nowait()
            )
        except queue.Empty:
            return None

    def close(self) -> None:
        with self._lock:
            self.closed += 1

    def create_mig(self, gpu_uuid: str, profile_id: int, start: int) -> MigDeviceInfo:
        self._enter("create_mig")
        with self._lock:
            gpu = self._gpu(gpu_uuid)
            profile = next((p for p in gpu.mig_profiles if p.profile_id == profile_id), None)
            if profile is None:
                raise NvmlError(f"GPU {gpu_uuid} has no GPU-instance profile {profile_id}")
            place = next((p for p in profile.placements if p.start == start), None)
            if place is None:
                raise NvmlError(f"profile {profile.name} cannot be placed at {start}")
            mine = self.created.setdefault(gpu_uuid, {})
            taken = {s for _pid, p in mine for s in range(p.start, p.start + p.size)}
            if taken & set(range(place.start, place.start + place.size)):
                raise NvmlError("Insufficient Resources")  # what NVML says of an overlap
            gi = 1 + max((m.gpu_instance_id for m in mine.values()), default=0)
            mig = MigDeviceInfo(
                index=len(gpu.mig_devices),
                uuid=_uuid("MIG", f"{gpu_uuid}-{profile_id}-{start}-{self.calls.count('create_mig')}"),
                gpu_instance_id=gi,
                compute_instance_id=0,
                gi_slices=profile.slices,
                ci_slices=profile.slices,
                memory_mib=profile.memory_mib,
                multiprocessors=profile.multiprocessors,
                copy_engines=profile.copy_engines,
                decoders=profile.decoders,
                encoders=profile.encoders,
                jpegs=profile.jpegs,
                ofas=profile.ofas,
                profile=profile.name,
                gi_profile_id=profile_id,
                placement_start=place.start,
                placement_size=place.size,
            )
            mine[(profile_id, place)] = mig
            self._set_gpu(replace(gpu, mig_devices=(*gpu.mig_devices, mig)))
            return mig

    def destroy_mig(self, gpu_uuid: str, profile_id: int, start: int) -> bool:
        self._enter("destroy_mig")
        with self._lock:
            mine = self.created.get(gpu_uuid, {})
            key = next((k for k in mine if k[0] == profile_id and k[1].start == start), None)
            if key is None:
                return False
            gone = mine.pop(key)
            gpu = self._gpu(gpu_uuid)
            self._set_gpu(replace(gpu, mig_devices=tuple(m for m in gpu.mig_devices if m.uuid != gone.uuid)))
            return True

    def _gpu(self, uuid: str) -> GpuInfo:
        assert self.snapshot_value is not None, "FakeNvml needs a snapshot"
        gpu = next((g for g in self.snapshot_value.gpus if g.uuid == uuid), None)
        if gpu is None:
            raise NvmlError(f"no GPU {uuid}")
        return gpu

    def _set_gpu(self, gpu: GpuInfo) -> None:
        assert self.snapshot_value is not None
        gpus = tuple(gpu if g.uuid == gpu.uuid else g for g in self.snapshot_value.gpus)
        self.snapshot_value = replace(self.snapshot_value, gpus=gpus)

    # -- test controls ------------------------------------------------------------------
    def push_event(self, event: XidEvent) -> None:
        self._events.put(event)

    def break_gpu(self, uuid: str, reason: str = "GPU is lost") -> None:
        with self._lock:
            self.broken[uuid] = reason

    def repair_gpu(self, uuid: str) -> None:
        with self._lock:
            self.broken.pop(uuid, None)


# -- snapshots of real machines ------------------------------------------------------------
# Values as NVML reports them on these machines (names, memory totals, compute capability,
# driver and CUDA versions, MIG instance attributes). UUIDs are made up but well-formed.


def _uuid(prefix: str, seed: str) -> str:
    import uuid

    return f"{prefix}-{uuid.uuid5(uuid.NAMESPACE_URL, seed)}"


def h100x8() -> NvmlSnapshot:
    """An 8x H100 SXM5 80GB HGX node (DGX H100), driver 550.54.15 / CUDA 12.4."""
    buses = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
    gpus = tuple(
        GpuInfo(
            index=i,
            uuid=_uuid("GPU", f"h100-{i}"),
            name="NVIDIA H100 80GB HBM3",
            memory_bytes=81559 * MIB,
            pci_bus_id=f"00000000:{bus}:00.0",
            pci_device_id=0x233010DE,
            minor=i,
            compute=(9, 0),
            architecture=9,
            mig_capable=True,
            mig_enabled=False,
        )
        for i, bus in enumerate(buses)
    )
    return NvmlSnapshot(driver_version="550.54.15", cuda_driver_version=12040, gpus=gpus)


def _a100_migs(gpu: int, layout: list[str]) -> tuple[MigDeviceInfo, ...]:
    # Attributes of A100 80GB MIG instances: 1g.10gb = 14 SMs, 9728 MiB, 1 copy engine;
    # 3g.40gb = 42 SMs, 40192 MiB, 3 copy engines, 2 decoders.
    kinds = {
        "1g.10gb": {"gi_slices": 1, "ci_slices": 1, "memory_mib": 9728, "multiprocessors": 14, "copy_engines": 1},
        "3g.40gb": {
            "gi_slices": 3, "ci_slices": 3, "memory_mib": 40192, "multiprocessors": 42,
            "copy_engines": 3, "decoders": 2,
        },
    }  # fmt: skip
    gi_ids = {"1g.10gb": iter(range(7, 15)), "3g.40gb": iter(range(1, 3))}
    out = []
    for slot, kind in enumerate(layout):
        attrs = kinds[kind]
        out.append(
            MigDeviceInfo(
                index=slot,
                uuid=_uuid("MIG", f"a100-{gpu}-{slot}"),
                gpu_instance_id=next(gi_ids[kind]) if kind in gi_ids else slot,
                compute_instance_id=0,
                profile=mig_profile(
                    gi_slices=int(attrs["gi_slices"]),
                    ci_slices=int(attrs["ci_slices"]),
                    memory_mib=int(attrs["memory_mib"]),
                    parent_memory_bytes=A100_80GB_BYTES,
                ),
                **attrs,
            )
        )
    return tuple(out)


A100_80GB_BYTES = 81920 * 1024 * 1024


def a100_mig(layouts: tuple[list[str], ...] | None = None) -> NvmlSnapshot:
    """Two A100 SXM4 80GB with MIG on, driver 535.161.08 / CUDA 12.2. By default GPU 0 has
    four 1g.10gb and one 3g.40gb instance, GPU 1 seven 1g.10gb."""
    if layouts is None:
        layouts = (["3g.40gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"], ["1g.10gb"] * 7)
    gpus = tuple(
        GpuInfo(
            index=i,
            uuid=_uuid("GPU", f"a100-{i}"),
            name="NVIDIA A100-SXM4-80GB",
            memory_bytes=A100_80GB_BYTES,
            pci_bus_id=bus,
            pci_device_id=0x20B210DE,
            minor=i,
            compute=(8, 0),
            architecture=7,
            mig_capable=True,
            mig_enabled=bool(layout),
            mig_devices=_a100_migs(i, layout),
        )
        for i, (bus, layout) in enumerate(zip(("00000000:07:00.0", "00000000:87:00.0"), layouts, strict=True))
    )
    return NvmlSnapshot(driver_version="535.161.08", cuda_driver_version=12020, gpus=gpus)


A100_40GB_BYTES = 40960 * MIB
DGX_A100_BUSES = ("07", "0F", "47", "4E", "87", "90", "B7", "BD")


def _placements(size: int, *starts: int) -> tuple[MigPlacement, ...]:
    return tuple(MigPlacement(s, size) for s in starts)


# The A100 40GB's GPU-instance profiles as its driver lists them (nvidia-smi mig -lgip,
# -lgipp): placements are in memory slices, eight of them; a 3g instance spans four.
A100_40GB_PROFILES = (
    MigProfileInfo(19, "1g.5gb", 1, 7, 4864, 14, copy_engines=1, placements=_placements(1, *range(7))),
    MigProfileInfo(
        14, "2g.10gb", 2, 3, 9856, 28, copy_engines=2, decoders=1, placements=_placements(2, 0, 2, 4)
    ),
    MigProfileInfo(
        9, "3g.20gb", 3, 2, 19968, 42, copy_engines=3, decoders=2, placements=_placements(4, 0, 4)
    ),
    MigProfileInfo(5, "4g.20gb", 4, 1, 19968, 56, copy_engines=4, decoders=2, placements=_placements(4, 0)),
    MigProfileInfo(
        0,
        "7g.40gb",
        7,
        1,
        40192,
        98,
        copy_engines=7,
        decoders=5,
        jpegs=1,
        ofas=1,
        placements=_placements(8, 0),
    ),
)


def a100_40gb(gpus: int = 1, *, mig_enabled: bool = True) -> NvmlSnapshot:
    """Up to eight A100 SXM4 40GB GPUs (a DGX A100's, on its buses), driver 550.54.15 / CUDA 12.4, MIG mode on (by
    default) and no instance made yet: what dynamic partitioning starts from."""
    out = tuple(
        GpuInfo(
            index=i,
            uuid=_uuid("GPU", f"a100-40gb-{i}"),
            name="NVIDIA A100-SXM4-40GB",
            memory_bytes=A100_40GB_BYTES,
            pci_bus_id=f"00000000:{bus}:00.0",
            pci_device_id=0x20B010DE,
            minor=i,
            compute=(8, 0),
            architecture=7,
            mig_capable=True,
            mig_enabled=mig_enabled,
            mig_profiles=A100_40GB_PROFILES if mig_enabled else (),
        )
        for i, bus in enumerate(DGX_A100_BUSES[:gpus])
    )
    return NvmlSnapshot(driver_version="550.54.15", cuda_driver_version=12040, gpus=out)


def t4() -> NvmlSnapshot:
    """An AWS g4dn.xlarge: one Tesla T4, driver 535.183.01 / CUDA 12.2, no MIG."""
    gpu = GpuInfo(
        index=0,
        uuid=_uuid("GPU", "t4-0"),
        name="Tesla T4",
        memory_bytes=15360 * MIB,
        pci_bus_id="00000000:00:1E.0",
        pci_device_id=0x1EB810DE,
        minor=0,
        compute=(7, 5),
        architecture=6,
    )
    return NvmlSnapshot(driver_version="535.183.01", cuda_driver_version=12020, gpus=(gpu,))


def snapshot_from_dict(data: dict[str, Any]) -> NvmlSnapshot:
    """A snapshot as ``dataclasses.asdict`` wrote it: what a capture on a real GPU node
    keeps (``tests/fixtures/capture_gpu.py``)."""

    def gpu(g: dict[str, Any]) -> GpuInfo:
        profiles = tuple(
            MigProfileInfo(**{**p, "placements": tuple(MigPlacement(**x) for x in p["placements"])})
            for p in g.get("mig_profiles", ())
        )
        return GpuInfo(
            **{
                **g,
                "compute": tuple(g["compute"]) if g.get("compute") else None,
                "mig_devices": tuple(MigDeviceInfo(**m) for m in g.get("mig_devices", ())),
                "mig_profiles": profiles,
            }
        )

    return NvmlSnapshot(
        driver_version=data["driver_version"],
        cuda_driver_version=int(data["cuda_driver_version"]),
        gpus=tuple(gpu(g) for g in data.get("gpus", ())),
    )
