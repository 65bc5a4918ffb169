"""NVML through a small adapter.

The GPU source and the GPU device kind need a handful of NVML calls. They go through the
:class:`Nvml` protocol so that tests (and machines without a GPU) can use
:class:`nfd.sources.nvml_fake.FakeNvml`. :class:`PynvmlAdapter` is the real thing: it is
the only code in nfd that imports ``pynvml`` (PyPI ``nvidia-ml-py``), and it does so
lazily, the first time NVML is needed, so importing this module costs nothing.

Everything the adapter returns is plain data (frozen dataclasses), read in one go, so the
callers never hold NVML handles.
"""

from __future__ import annotations

import math

from nfd.record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (discover's path)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, Protocol
else:
    Protocol = object  # only the type checker needs the protocol to be one

# NVML's "no instance" value for GPU/compute instance ids in events on full GPUs.
NO_INSTANCE = 0xFFFFFFFF

# NVML error codes we act on (nvml.h; stable across releases).
_ERR_NOT_SUPPORTED = 3
_ERR_NOT_FOUND = 6
_ERR_INVALID_ARGUMENT = 2
_ERR_TIMEOUT = 10
_ERR_FUNCTION_NOT_FOUND = 13

# NVML event type bits (nvml.h).
EVENT_SINGLE_BIT_ECC = 0x1
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID_CRITICAL = 0x8


class NvmlUnavailable(Exception):
    """NVML cannot be used on this node (no binding, no library, no driver, no
    permission); the message says which, in one line."""


class NvmlError(Exception):
    """One NVML call failed on a usable NVML (a GPU fell off the bus, ...)."""


class MigDeviceInfo(Record, frozen=True):
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


class GpuInfo(Record, frozen=True):
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

    @property
    def memory_mib(self) -> int:
        return self.memory_bytes // (1024 * 1024)

    @property
    def sysfs_address(self) -> str:
        return sysfs_pci_address(self.pci_bus_id)


class NvmlSnapshot(Record, frozen=True):
    driver_version: str  # "550.54.15"
    cuda_driver_version: int  # 12040 for CUDA 12.4, as nvmlSystemGetCudaDriverVersion says
    gpus: tuple[GpuInfo, ...] = ()

    @property
    def cuda_version(self) -> tuple[int, int]:
        return self.cuda_driver_version // 1000, (self.cuda_driver_version % 1000) // 10


class XidEvent(Record, frozen=True):
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


# -- the real adapter -------------------------------------------------------------------


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class PynvmlAdapter:
    """NVML through ``pynvml``. ``module`` is for tests that hand in a stand-in module with
    pynvml's functions; by default ``pynvml`` is imported on first use."""

    def __init__(self, module: Any = None) -> None:
        self.module = module
        self._nv: Any = None
        self._events: Any = None

    # -- lifecycle ----------------------------------------------------------------------
    def _open(self) -> Any:
        if self._nv is not None:
            return self._nv
        nv = self.module
        if nv is None:
            try:
                import pynvml  # the only import of pynvml in nfd
            except ImportError:
                raise NvmlUnavailable("the NVML binding (nvidia-ml-py) is not installed") from None
            nv = pynvml
        try:
            nv.nvmlInit()
        except nv.NVMLError as e:
            raise NvmlUnavailable(f"NVML cannot start: {_err(e)}") from None
        except OSError as e:  # a broken libnvidia-ml.so
            raise NvmlUnavailable(f"NVML cannot start: {e}") from None
        self._nv = nv
        return nv

    def close(self) -> None:
        nv, self._nv = self._nv, None
        if nv is None:
            return
        events, self._events = self._events, None
        try:
            if events is not None:
                nv.nvmlEventSetFree(events)
        except nv.NVMLError:
            pass
        try:
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass

    # -- reading ------------------------------------------------------------------------
    def snapshot(self) -> NvmlSnapshot:
        nv = self._open()
        try:
            driver = _text(nv.nvmlSystemGetDriverVersion())
            cuda = int(nv.nvmlSystemGetCudaDriverVersion())
            count = int(nv.nvmlDeviceGetCount())
            gpus = tuple(self._gpu(nv, i) for i in range(count))
        except nv.NVMLError as e:
            raise NvmlError(_err(e)) from None
        return NvmlSnapshot(driver_version=driver, cuda_driver_version=cuda, gpus=gpus)

    def _gpu(self, nv: Any, index: int) -> GpuInfo:
        h = nv.nvmlDeviceGetHandleByIndex(index)
        pci = nv.nvmlDeviceGetPciInfo(h)
        memory = int(nv.nvmlDeviceGetMemoryInfo(h).total)
        compute = _optional(nv, lambda: tuple(int(x) for x in nv.nvmlDeviceGetCudaComputeCapability(h)))
        arch = _optional(nv, lambda: int(nv.nvmlDeviceGetArchitecture(h)))
        minor = _optional(nv, lambda: int(nv.nvmlDeviceGetMinorNumber(h)))
        mig_capable, mig_enabled = False, False
        mode = _optional(nv, lambda: nv.nvmlDeviceGetMigMode(h))
        if mode is not None:
            mig_capable, mig_enabled = True, int(mode[0]) == 1
        migs = self._migs(nv, h, memory) if mig_enabled else ()
        return GpuInfo(
            index=index,
            uuid=_text(nv.nvmlDeviceGetUUID(h)),
            name=_text(nv.nvmlDeviceGetName(h)),
            memory_bytes=memory,
            pci_bus_id=_text(pci.busId),
            pci_device_id=int(getattr(pci, "pciDeviceId", 0)),
            minor=index if minor is None else minor,
            compute=(compute[0], compute[1]) if compute and len(compute) == 2 else None,
            architecture=arch,
            mig_capable=mig_capable,
            mig_enabled=mig_enabled,
            mig_devices=migs,
        )

    def _suffixes(self, nv: Any, h: Any) -> dict[int, str]:
        """GPU-instance profile id on this GPU -> the attribute its name carries."""
        out: dict[int, str] = {}
        for kind, suffix in GI_PROFILE_SUFFIXES.items():
            try:
                out[int(nv.nvmlDeviceGetGpuInstanceProfileInfo(h, kind).id)] = suffix
            except nv.NVMLError:
                continue  # a profile this GPU does not have
        return out

    def _suffix(self, nv: Any, h: Any, gi: int, suffixes: dict[int, str]) -> str:
        if not suffixes:
            return ""
        try:
            info = nv.nvmlGpuInstanceGetInfo(nv.nvmlDeviceGetGpuInstanceById(h, gi))
        except nv.NVMLError:
            return ""  # e.g. not privileged to look at GPU instances: plain name
        return suffixes.get(int(info.profileId), "")

    def _migs(self, nv: Any, h: Any, parent_memory: int) -> tuple[MigDeviceInfo, ...]:
        out: list[MigDeviceInfo] = []
        suffixes = self._suffixes(nv, h)
        for slot in range(int(nv.nvmlDeviceGetMaxMigDeviceCount(h))):
            try:
                m = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, slot)
            except nv.NVMLError as e:
                if _code(e) in (_ERR_NOT_FOUND, _ERR_INVALID_ARGUMENT):
                    continue  # an empty slot
                raise
            a = nv.nvmlDeviceGetAttributes(m)
            gi_slices, ci_slices = int(a.gpuInstanceSliceCount), int(a.computeInstanceSliceCount)
            memory_mib = int(a.memorySizeMB)
            gi = int(nv.nvmlDeviceGetGpuInstanceId(m))
            out.append(
                MigDeviceInfo(
                    index=slot,
                    uuid=_text(nv.nvmlDeviceGetUUID(m)),
                    gpu_instance_id=gi,
                    compute_instance_id=int(nv.nvmlDeviceGetComputeInstanceId(m)),
                    gi_slices=gi_slices,
                    ci_slices=ci_slices,
                    memory_mib=memory_mib,
                    multiprocessors=int(a.multiprocessorCount),
                    copy_engines=int(a.sharedCopyEngineCount),
                    decoders=int(a.sharedDecoderCount),
                    encoders=int(a.sharedEncoderCount),
                    jpegs=int(a.sharedJpegCount),
                    ofas=int(a.sharedOfaCount),
                    profile=mig_profile(
                        gi_slices=gi_slices,
                        ci_slices=ci_slices,
                        memory_mib=memory_mib,
                        parent_memory_bytes=parent_memory,
                        suffix=self._suffix(nv, h, gi, suffixes),
                    ),
                )
            )
        return tuple(out)

    # -- health ---------------------------------------------------------------------------
    def check(self, uuid: str) -> str | None:
        nv = self._open()
        try:
            h = nv.nvmlDeviceGetHandleByUUID(uuid)
            nv.nvmlDeviceGetMemoryInfo(h)
        except nv.NVMLError as e:
            return _err(e)
        return None

    def watch(self, uuids: Iterable[str]) -> None:
        nv = self._open()
        try:
            if self._events is None:
                self._events = nv.nvmlEventSetCreate()
            for uuid in uuids:
                h = nv.nvmlDeviceGetHandleByUUID(uuid)
                wanted = EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC | EVENT_SINGLE_BIT_ECC
                supported = int(nv.nvmlDeviceGetSupportedEventTypes(h))
                nv.nvmlDeviceRegisterEvents(h, wanted & supported, self._events)
        except nv.NVMLError as e:
            raise NvmlError(_err(e)) from None

    def wait_event(self, timeout_s: float) -> XidEvent | None:
        nv = self._open()
        if self._events is None:
            return None
        try:
            data = nv.nvmlEventSetWait_v2(self._events, max(0, int(timeout_s * 1000)))
        except nv.NVMLError as e:
            if _code(e) == _ERR_TIMEOUT:
                return None
            raise NvmlError(_err(e)) from None
        if int(data.eventType) != EVENT_XID_CRITICAL:
            return None
        try:
            uuid = _text(nv.nvmlDeviceGetUUID(data.device))
        except nv.NVMLError as e:
            raise NvmlError(f"event for an unknown device: {_err(e)}") from None
        return XidEvent(
            uuid=uuid,
            xid=int(data.eventData),
            gpu_instance_id=int(data.gpuInstanceId),
            compute_instance_id=int(data.computeInstanceId),
        )


def _code(e: BaseException) -> int | None:
    value = getattr(e, "value", None)
    return value if isinstance(value, int) else None


def _err(e: BaseException) -> str:
    text = str(e).strip()
    return text or f"NVML error {_code(e)}"


def _optional(nv: Any, call: Any) -> Any:
    """A call that some GPUs or drivers do not support: None instead of an error."""
    try:
        return call()
    except nv.NVMLError as e:
        if _code(e) in (_ERR_NOT_SUPPORTED, _ERR_FUNCTION_NOT_FOUND, _ERR_INVALID_ARGUMENT):
            return None
        raise
