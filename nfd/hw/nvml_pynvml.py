"""The real NVML adapter: :class:`PynvmlAdapter`, the only code in nfd that imports
``pynvml`` (PyPI ``nvidia-ml-py``), on first use. It answers the
:class:`nfd.hw.nvml.Nvml` protocol with that module's records."""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from nfd.hw.nvml import (
    EVENT_DOUBLE_BIT_ECC,
    EVENT_SINGLE_BIT_ECC,
    EVENT_XID_CRITICAL,
    GI_PROFILE_SUFFIXES,
    GpuInfo,
    MigDeviceInfo,
    MigPlacement,
    MigProfileInfo,
    Nvml,
    NvmlError,
    NvmlSnapshot,
    NvmlUnavailable,
    XidEvent,
    mig_profile,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

# NVML error codes we act on (nvml.h; stable across releases).
_ERR_NOT_SUPPORTED = 3
_ERR_NOT_FOUND = 6
_ERR_INVALID_ARGUMENT = 2
_ERR_TIMEOUT = 10
_ERR_FUNCTION_NOT_FOUND = 13


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
        profiles = self._profiles(nv, h, memory) if mig_enabled else ()
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
            mig_profiles=profiles,
        )

    def _profiles(self, nv: Any, h: Any, parent_memory: int) -> tuple[MigProfileInfo, ...]:
        """Every GPU-instance profile this GPU has, with its possible placements."""
        out: list[MigProfileInfo] = []
        for kind in range(int(getattr(nv, "NVML_GPU_INSTANCE_PROFILE_COUNT", 0x12))):
            try:
                p = nv.nvmlDeviceGetGpuInstanceProfileInfo(h, kind)
            except nv.NVMLError:
                continue  # a profile this GPU does not have
            count = int(p.instanceCount)
            n = ctypes.c_uint(0)
            try:  # without an array: how many placements there are (more than instances: +me)
                nv.nvmlDeviceGetGpuInstancePossiblePlacements(h, int(p.id), None, ctypes.byref(n))
                places = (nv.c_nvmlGpuInstancePlacement_t * max(int(n.value), 1))()
                nv.nvmlDeviceGetGpuInstancePossiblePlacements(h, int(p.id), places, ctypes.byref(n))
            except nv.NVMLError:
                continue
            slices, memory_mib = int(p.sliceCount), int(p.memorySizeMB)
            out.append(
                MigProfileInfo(
                    profile_id=int(p.id),
                    name=mig_profile(
                        gi_slices=slices,
                        ci_slices=slices,
                        memory_mib=memory_mib,
                        parent_memory_bytes=parent_memory,
                        suffix=GI_PROFILE_SUFFIXES.get(kind, ""),
                    ),
                    slices=slices,
                    instances=count,
                    memory_mib=memory_mib,
                    multiprocessors=int(p.multiprocessorCount),
                    copy_engines=int(p.copyEngineCount),
                    decoders=int(p.decoderCount),
                    encoders=int(p.encoderCount),
                    jpegs=int(p.jpegCount),
                    ofas=int(p.ofaCount),
                    placements=tuple(
                        MigPlacement(int(x.start), int(x.size)) for x in list(places)[: int(n.value)]
                    ),
                )
            )
        return tuple(out)

    def _suffixes(self, nv: Any, h: Any) -> dict[int, str]:
        """GPU-instance profile id on this GPU -> the attribute its name carries."""
        out: dict[int, str] = {}
        for kind, suffix in GI_PROFILE_SUFFIXES.items():
            try:
                out[int(nv.nvmlDeviceGetGpuInstanceProfileInfo(h, kind).id)] = suffix
            except nv.NVMLError:
                continue  # a profile this GPU does not have
        return out

    def _gi_info(self, nv: Any, h: Any, gi: int) -> Any:
        """The GPU instance's profile and placement; None when NVML does not say (not
        privileged to look at GPU instances)."""
        try:
            return nv.nvmlGpuInstanceGetInfo(nv.nvmlDeviceGetGpuInstanceById(h, gi))
        except nv.NVMLError:
            return None

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
            info = self._gi_info(nv, h, gi)
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
                        suffix=suffixes.get(int(info.profileId), "") if info is not None else "",
                    ),
                    gi_profile_id=int(info.profileId) if info is not None else -1,
                    placement_start=int(info.placement.start) if info is not None else -1,
                    placement_size=int(info.placement.size) if info is not None else 0,
                )
            )
        return tuple(out)

    # -- partitioning -------------------------------------------------------------------
    def create_mig(self, gpu_uuid: str, profile_id: int, start: int) -> MigDeviceInfo:
        nv = self._open()
        try:
            h = nv.nvmlDeviceGetHandleByUUID(gpu_uuid)
            memory = int(nv.nvmlDeviceGetMemoryInfo(h).total)
            size = next(
                (x.size for p in self._profiles(nv, h, memory) if p.profile_id == profile_id
                 for x in p.placements if x.start == start),
                None,
            )  # fmt: skip
            if size is None:
                raise NvmlError(f"GPU {gpu_uuid}: profile {profile_id} has no placement at {start}")
            place = nv.c_nvmlGpuInstancePlacement_t()
            place.start, place.size = start, size
            gi = nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, profile_id, ctypes.byref(place))
            try:
                gi_id = int(nv.nvmlGpuInstanceGetInfo(gi).id)
                ci_profile = self._full_ci_profile(nv, gi)
                ci = nv.nvmlGpuInstanceCreateComputeInstance(gi, ci_profile)
                ci_id = int(nv.nvmlComputeInstanceGetInfo(ci).id)
            except nv.NVMLError:
                nv.nvmlGpuInstanceDestroy(gi)  # no half-made instance left behind
                raise
            found = next(
                (
                    m
                    for m in self._migs(nv, h, memory)
                    if (m.gpu_instance_id, m.compute_instance_id) == (gi_id, ci_id)
                ),
                None,
            )
        except nv.NVMLError as e:
            raise NvmlError(f"GPU {gpu_uuid}: creating a MIG device: {_err(e)}") from None
        if found is None:
            raise NvmlError(f"GPU {gpu_uuid}: MIG device {gi_id}/{ci_id} made but not listed")
        return found

    def _full_ci_profile(self, nv: Any, gi: Any) -> int:
        """The compute-instance profile spanning the whole GPU instance: the one with the
        most slices that it offers."""
        best: tuple[int, int] | None = None
        for kind in range(int(getattr(nv, "NVML_COMPUTE_INSTANCE_PROFILE_COUNT", 0x9))):
            try:
                info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                    gi, kind, nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
                )
            except nv.NVMLError:
                continue
            if best is None or int(info.sliceCount) > best[0]:
                best = (int(info.sliceCount), int(info.id))
        if best is None:
            raise NvmlError("the GPU instance offers no compute-instance profile")
        return best[1]

    def destroy_mig(self, gpu_uuid: str, profile_id: int, start: int) -> bool:
        nv = self._open()
        try:
            h = nv.nvmlDeviceGetHandleByUUID(gpu_uuid)
            gis = (nv.c_nvmlGpuInstance_t * 8)()  # a GPU holds at most 7 GPU instances
            n = ctypes.c_uint(0)
            nv.nvmlDeviceGetGpuInstances(h, profile_id, gis, ctypes.byref(n))
            for gi in list(gis)[: int(n.value)]:
                if int(nv.nvmlGpuInstanceGetInfo(gi).placement.start) != start:
                    continue
                for kind in range(int(getattr(nv, "NVML_COMPUTE_INSTANCE_PROFILE_COUNT", 0x9))):
                    self._destroy_cis(nv, gi, kind)
                nv.nvmlGpuInstanceDestroy(gi)
                return True
        except nv.NVMLError as e:
            raise NvmlError(f"GPU {gpu_uuid}: destroying a MIG device: {_err(e)}") from None
        return False

    def _destroy_cis(self, nv: Any, gi: Any, kind: int) -> None:
        try:
            ci_profile = int(
                nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                    gi, kind, nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
                ).id
            )
        except nv.NVMLError:
            return  # a profile this instance does not have
        cis = (nv.c_nvmlComputeInstance_t * 8)()
        n = ctypes.c_uint(0)
        nv.nvmlGpuInstanceGetComputeInstances(gi, ci_profile, cis, ctypes.byref(n))
        for ci in list(cis)[: int(n.value)]:
            nv.nvmlComputeInstanceDestroy(ci)

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


def open_adapter(factory: Callable[[], Nvml] | None) -> Nvml:
    """The adapter ``factory`` makes (tests hand in a fake), else the real one (pynvml)."""
    return factory() if factory is not None else PynvmlAdapter()
