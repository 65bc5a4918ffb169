"""NVML as nfd sees it: the :class:`Nvml` protocol and the plain data it answers with.

The GPU source and the GPU device kind need a handful of NVML calls. They go through the
:class:`Nvml` protocol so that tests (and machines without a GPU) can use
:class:`nfd.hw.nvml_fake.FakeNvml`; :func:`nfd.hw.nvml_pynvml.open_adapter` gives the
real one, :class:`nfd.hw.nvml_pynvml.PynvmlAdapter`, which imports ``pynvml`` only when
NVML is first needed.

Everything an adapter returns is plain data (frozen records), read in one go, so the
callers never hold NVML handles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Protocol
else:
    Protocol = object  # only the type checker needs the protocol to be one

# NVML's "no instance" value for GPU/compute instance ids in events on full GPUs.
NO_INSTANCE = 0xFFFFFFFF

# NVML event type bits (nvml.h).
EVENT_SINGLE_BIT_ECC = 0x1
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID_CRITICAL = 0x8


class NvmlUnavailable(Exception):
    """NVML cannot be used on this node (no binding, no library, no driver, no
    permission); the message says which, in one line."""


class NvmlError(Exception):
    """One NVML call failed on a usable NVML (a GPU fell off the bus, ...)."""


@dataclass(frozen=True, slots=True)
class MigDeviceInfo:
    """One MIG device (a compute instance inside a GPU instance) of a GPU."""

    index: int  # slot on the parent GPU, as nvmlDeviceGetMigDeviceHandleByIndex counts
    uuid: str  # "MIG-..."
    gpu_instance_id: int
    compute_instance_id: int
    gi_slices: int
    ci_slices: int
    memory_mib: int
    multiprocessors: int = 0
    copy_engines: int = 0
    decoders: int = 0
    encoders: int = 0
    jpegs: int = 0
    ofas: int = 0
    # "1g.10gb", "1c.3g.40gb"; computed from the attributes when the adapter reads it.
    profile: str = ""
    # Its GPU instance's profile and placement (memory slices); -1 when NVML did not say.
    gi_profile_id: int = -1
    placement_start: int = -1
    placement_size: int = 0


@dataclass(frozen=True, slots=True)
class MigPlacement:
    """Where a GPU instance may sit: its first memory slice and how many it spans."""

    start: int
    size: int


@dataclass(frozen=True, slots=True)
class MigProfileInfo:
    """One GPU-instance profile a MIG-capable GPU offers (``nvidia-smi mig -lgip``), with
    the placements it may take (``-lgipp``). Engine counts are per instance."""

    profile_id: int  # nvmlGpuInstanceProfileInfo_t.id: what creating an instance takes
    name: str  # "1g.5gb"
    slices: int  # GPU (compute) slices
    instances: int  # at most this many at once on an empty GPU
    memory_mib: int
    multiprocessors: int
    copy_engines: int = 0
    decoders: int = 0
    encoders: int = 0
    jpegs: int = 0
    ofas: int = 0
    placements: tuple[MigPlacement, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One full GPU as NVML sees it."""

    index: int
    uuid: str  # "GPU-..."
    name: str  # "NVIDIA H100 80GB HBM3"
    memory_bytes: int
    pci_bus_id: str  # NVML's form, "00000000:18:00.0"
    minor: int  # /dev/nvidia<minor>
    pci_device_id: int = 0  # NVML's combined id, device << 16 | vendor (0x233010DE)
    compute: tuple[int, int] | None = None  # CUDA compute capability
    architecture: int | None = None  # nvmlDeviceArchitecture_t
    mig_capable: bool = False
    mig_enabled: bool = False
    mig_devices: tuple[MigDeviceInfo, ...] = ()
    # The GPU-instance profiles it offers (read while MIG mode is on).
    mig_profiles: tuple[MigProfileInfo, ...] = ()

    @property
    def memory_mib(self) -> int:
        return self.memory_bytes // (1024 * 1024)

    @property
    def sysfs_address(self) -> str:
        return sysfs_pci_address(self.pci_bus_id)


@dataclass(frozen=True, slots=True)
class NvmlSnapshot:
    driver_version: str  # "550.54.15"
    cuda_driver_version: int  # 12040 for CUDA 12.4, as nvmlSystemGetCudaDriverVersion says
    gpus: tuple[GpuInfo, ...] = ()

    @property
    def cuda_version(self) -> tuple[int, int]:
        return self.cuda_driver_version // 1000, (self.cuda_driver_version % 1000) // 10


@dataclass(frozen=True, slots=True)
class XidEvent:
    """A critical XID error NVML reported for a GPU (or one MIG device of it)."""

    uuid: str  # the full GPU's UUID
    xid: int
    gpu_instance_id: int = NO_INSTANCE
    compute_instance_id: int = NO_INSTANCE


class Nvml(Protocol):
    """The NVML calls nfd needs. Every method may raise :class:`NvmlUnavailable`."""

    def snapshot(self) -> NvmlSnapshot:
        """Driver versions and every GPU with its MIG devices."""
        ...

    def check(self, uuid: str) -> str | None:
        """None when the GPU (or MIG device) with this UUID answers NVML queries;
        otherwise why not, in a few words."""
        ...

    def watch(self, uuids: Iterable[str]) -> None:
        """Start receiving critical XID events for these full GPUs."""
        ...

    def wait_event(self, timeout_s: float) -> XidEvent | None:
        """The next critical XID event, or None when none came within the timeout."""
        ...

    def close(self) -> None:
        """Release NVML; a later call opens it again."""
        ...

    def create_mig(self, gpu_uuid: str, profile_id: int, start: int) -> MigDeviceInfo:
        """Create a GPU instance of this profile at this placement and one compute
        instance spanning it; the MIG device made. Raises :class:`NvmlError` when the
        placement is taken or invalid."""
        ...

    def destroy_mig(self, gpu_uuid: str, profile_id: int, start: int) -> bool:
        """Destroy the GPU instance of this profile at this placement with its compute
        instances; False when there was none."""
        ...


# -- pure helpers -----------------------------------------------------------------------


def sysfs_pci_address(nvml_bus_id: str) -> str:
    """NVML's bus id (``00000000:18:00.0``, upper case hex) as sysfs names the device
    (``0000:18:00.0``)."""
    text = nvml_bus_id.strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        try:
            return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
        except ValueError:
            return text
    if len(parts) == 2:  # no domain given
        return f"0000:{text}"
    return text


# GPU-instance profile kinds (nvmlGpuInstanceProfile indexes) whose names carry an
# attribute after the size: media extensions (+me), graphics (+gfx), none (-me), all (+me.all).
GI_PROFILE_SUFFIXES: dict[int, str] = {
    0x7: "+me",
    0x8: "+me",
    0xA: "+gfx",
    0xB: "+gfx",
    0xC: "+gfx",
    0xD: "-me",
    0xE: "-me",
    0xF: "+me.all",
    0x10: "+me.all",
    0x11: "+gfx",
}


def mig_profile(
    *, gi_slices: int, ci_slices: int, memory_mib: int, parent_memory_bytes: int, suffix: str = ""
) -> str:
    """The MIG profile name NVIDIA's tools use (``1g.10gb``, ``1c.3g.40gb``).

    The memory part is the instance's share of the GPU's memory, rounded up to eighths,
    times the GPU's memory in whole GB: NVIDIA's naming, which is not the MiB value
    divided by 1024 (a "1g.10gb" instance has 9728 MiB).
    """
    mem_gb = 0
    if parent_memory_bytes > 0:
        fraction = memory_mib * 1024 * 1024 / parent_memory_bytes
        fraction = math.ceil(fraction * 8) / 8
        total_gb = (parent_memory_bytes + (1 << 30) - 1) >> 30
        mem_gb = round(fraction * total_gb)
    if ci_slices == gi_slices:
        return f"{gi_slices}g.{mem_gb}gb{suffix}"
    return f"{ci_slices}c.{gi_slices}g.{mem_gb}gb{suffix}"
