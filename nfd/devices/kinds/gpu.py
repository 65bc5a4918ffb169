"""GPUs as allocatable devices: NVIDIA GPUs and MIG devices through NVML, AMD and Intel
GPUs from their DRM cards.

Config (one resource per selector)::

    resources:
      - name: nvidia.com/gpu              # full GPUs (those without MIG)
        gpu: {vendor: nvidia}
        replicas: 4                       # time-slicing: nvidia.com/gpu = 4 x GPUs
      - name: nvidia.com/mig-1g.10gb      # MIG devices of one profile
        gpu: {vendor: nvidia, migProfile: 1g.10gb}
      - name: nvidia.com/gpu-partitioned  # DRA: GPUs in MIG mode whole and as every
        gpu: {vendor: nvidia, migPartitions: true}   # MIG placement, made at prepare
        servedBy: dra
      - name: gpu.intel.com/i915
        gpu: {vendor: intel, driver: i915}
      - name: amd.com/gpu
        gpu: {vendor: amd}

NVIDIA devices are named by UUID (CDI names ``nvidia.com/gpu=GPU-...``), get
``/dev/nvidia<minor>``, ``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools``
(the UVM nodes when the host has them), MIG devices also their ``/dev/nvidia-caps`` nodes,
and ``NVIDIA_VISIBLE_DEVICES``. Health: a critical XID error marks the GPU (or just the MIG
device it names) unhealthy, as NVIDIA's plugin does; unlike that plugin, the device
becomes healthy again once NVML answers for it after ``recoverAfter`` seconds without a
new error. NVML is also asked every ``checkInterval`` seconds, which catches a GPU that
fell off the bus without an event.

The selector is parsed in :mod:`.gpu_selector`, health lives in :mod:`.gpu_health`, and
what each device gets (fields, MIG capability nodes, DRM cards) in :mod:`.gpu_devices`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from nfd.devices.kinds.gpu_devices import (
    FIELDS,
    drm_devices,
    mig_cap_nodes,
    mig_partitions,
    nvidia_attributes,
)
from nfd.devices.kinds.gpu_health import NvmlHealth
from nfd.devices.kinds.gpu_selector import GpuSelector, parse_selector
from nfd.devices.kinds.model import DeviceNode, FoundDevice, Gone, PrepareError
from nfd.devices.kinds.shared import describe_fields, pci_problem
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.hw.accel_ids import GPU_CLASSES
from nfd.hw.accel_pci import numa_node, pci_functions
from nfd.hw.nvml import GpuInfo, MigDeviceInfo, Nvml, NvmlError, NvmlUnavailable
from nfd.hw.nvml_pynvml import open_adapter

log = logging.getLogger("nfd.deviceplugin")


@dataclass
class GpuKind(NvmlHealth):
    """``nvml`` makes the NVML adapter (default: the real one); health settings and the
    event thread come from :class:`NvmlHealth`."""

    nvml: Callable[[], Nvml] | None = None
    name = "gpu"
    template_fields = FIELDS
    udev_subsystems: tuple[str, ...] = ("pci", "drm")

    _unavailable: str | None = field(default=None, init=False, repr=False)
    # MIG instances on partitioned GPUs by (GPU UUID, GPU-instance profile, placement
    # start): every one NVML showed at discovery or this kind made since; and the
    # placements prepared claims hold (made by a prepare here, or read from the
    # checkpoint). An instance at a placement no claim holds an admin made by hand: its
    # capacity is not the scheduler's to give.
    _instances: dict[tuple[str, int, int], MigDeviceInfo] = field(
        default_factory=dict, init=False, repr=False
    )
    _claimed: set[tuple[str, int, int]] = field(default_factory=set, init=False, repr=False)

    # -- config -------------------------------------------------------------------------
    def parse_selector(self, raw: Any, where: str) -> GpuSelector:
        return parse_selector(raw, where)

    def describe(self, selector: Any) -> str:
        s: GpuSelector = selector
        return describe_fields(
            "gpu", (("vendor", s.vendor), ("driver", s.drivers), ("migProfile", s.mig_profiles))
        )

    # -- discovery ----------------------------------------------------------------------
    def discover(
        self, selector: Any, *, resource: str, features: Features, host: HostRoot
    ) -> list[FoundDevice]:
        sel: GpuSelector = selector
        if sel.vendor == "nvidia":
            return self._nvidia(sel, host)
        return drm_devices(sel, host)

    def _open(self) -> Nvml | None:
        if self._adapter is None and self._unavailable is None:
            self._adapter = open_adapter(self.nvml)
        return self._adapter

    def _nvidia(self, sel: GpuSelector, host: HostRoot) -> list[FoundDevice]:
        if not any(f.vendor == "10de" for f in pci_functions(host, classes=GPU_CLASSES)):
            return []  # no NVIDIA GPU on PCI: nothing to ask NVML about
        nvml = self._open()
        if nvml is None:
            return []
        try:
            snap = nvml.snapshot()
        except (NvmlUnavailable, NvmlError) as e:
            if self._unavailable is None:
                log.warning("NVML not available, no NVIDIA devices to serve: %s", e)
            self._unavailable = str(e)
            return []
        uvm = [
            DeviceNode(p, p, "rwm")
            for p in ("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
            if os.path.exists(host.dev / p[len("/dev/") :])
        ]
        common = (DeviceNode("/dev/nvidiactl", "/dev/nvidiactl", "rwm"), *uvm)
        found: list[FoundDevice] = []
        watched: list[str] = []
        for g in snap.gpus:
            watched.append(g.uuid)
            gpu_node = DeviceNode(f"/dev/nvidia{g.minor}", f"/dev/nvidia{g.minor}", "rwm")
            numa = numa_node(host, g.sysfs_address)
            if sel.mig_partitions and g.mig_enabled and g.mig_profiles:
                found += self._partitions(g, numa, (gpu_node, *common))
                self._seen_instances(g)
                self._policy[g.uuid] = sel
                continue
            if not sel.mig_profiles:
                if g.mig_enabled:
                    continue  # its capacity is handed out as MIG devices
                found.append(
                    FoundDevice(
                        id=g.uuid,
                        numa_node=numa,
                        device_nodes=(gpu_node, *common),
                        env=(("NVIDIA_VISIBLE_DEVICES", g.uuid),),
                        attributes=nvidia_attributes(g, uuid=g.uuid, profile="", parent=""),
                    )
                )
                self._policy[g.uuid] = sel
                continue
            for m in g.mig_devices:
                with self._lock:
                    self._mig_places[(g.uuid, m.gpu_instance_id, m.compute_instance_id)] = m.uuid
                    kids = self._children.setdefault(g.uuid, [])
                    if m.uuid not in kids:
                        kids.append(m.uuid)
                if "*" not in sel.mig_profiles and m.profile not in sel.mig_profiles:
                    continue
                caps = mig_cap_nodes(host, g.minor, m.gpu_instance_id, m.compute_instance_id)
                found.append(
                    FoundDevice(
                        id=m.uuid,
                        numa_node=numa,
                        device_nodes=(gpu_node, *common, *caps),
                        env=(("NVIDIA_VISIBLE_DEVICES", m.uuid),),
                        attributes=nvidia_attributes(g, uuid=m.uuid, profile=m.profile, parent=g.uuid),
                    )
                )
                self._policy[m.uuid] = sel
        self._watch(nvml, watched)
        return found

    def _partitions(self, g: GpuInfo, numa: int | None, nodes: tuple[DeviceNode, ...]) -> list[FoundDevice]:
        """The whole GPU and each MIG placement, one counter set between them. A
        placement's ``uuid`` is its GPU's: its health is the GPU's until it is made."""
        out = []
        for part, profile, start, size in mig_partitions(g):
            attrs = nvidia_attributes(g, uuid=g.uuid, profile="", parent="")
            if profile is not None:
                attrs.update(
                    profile=profile.name,
                    parent_uuid=g.uuid,
                    mig_profile_id=str(profile.profile_id),
                    placement_start=str(start),
                    placement_size=str(size),
                )
            out.append(
                FoundDevice(
                    id=g.uuid if profile is None else f"{g.uuid}-mig-{profile.profile_id}-{start}",
                    numa_node=numa,
                    device_nodes=nodes,
                    env=(("NVIDIA_VISIBLE_DEVICES", g.uuid),),
                    attributes=attrs,
                    partition=part,
                )
            )
        return out

    def _seen_instances(self, g: GpuInfo) -> None:
        """The GPU's MIG instances as NVML shows them now."""
        with self._lock:
            for key in [k for k in self._instances if k[0] == g.uuid]:
                del self._instances[key]
            for m in g.mig_devices:
                if m.placement_start < 0:
                    log.warning(
                        "GPU %s: MIG device %s (%s): NVML does not say where it is; its capacity is"
                        " not taken off the GPU's counters", g.uuid, m.uuid, m.profile,
                    )  # fmt: skip
                    continue
                self._instances[(g.uuid, m.gi_profile_id, m.placement_start)] = m

    # -- DRA's prepare and unprepare ------------------------------------------------------
    def makes(self, device: FoundDevice) -> bool:
        """Whether :meth:`prepare_device` makes something of it (a MIG placement)."""
        return _placement(device) is not None

    def adopt_device(self, device: FoundDevice) -> bool:
        """A prepared claim's MIG placement, from the checkpoint (after a restart, or
        the other instance's in a rolling update): the claim's, and so is its instance
        (reused by the claim's next prepare, destroyed at its unprepare). True when NVML
        showed one there."""
        key = _placement(device)
        if key is None:
            return False
        with self._lock:
            new = key not in self._claimed
            self._claimed.add(key)
            return new and key in self._instances

    def unclaimed_instance(self, device: FoundDevice) -> bool:
        """Whether a MIG instance no claim holds sits at this placement (an admin's): the
        counters it consumes are taken off its GPU's."""
        key = _placement(device)
        with self._lock:
            return key is not None and key in self._instances and key not in self._claimed

    def prepare_device(self, device: FoundDevice, host: HostRoot) -> FoundDevice:
        """A MIG placement's instance made now (GPU instance and a compute instance
        spanning it), or the claim's own adopted one, with its /dev/nvidia-caps nodes and
        its UUID for the container; any other device as it is. Raises PrepareError."""
        a, key = device.attributes, _placement(device)
        if key is None:
            return device
        with self._lock:
            mig = self._instances.get(key) if key in self._claimed else None
        if mig is None:
            try:
                mig = self._nvml().create_mig(*key)
            except (NvmlError, NvmlUnavailable) as e:
                raise PrepareError(f"creating MIG {a['profile']} at {a['placement_start']}: {e}") from None
            with self._lock:
                self._instances[key] = mig
                self._claimed.add(key)
        caps = mig_cap_nodes(host, int(a["minor"]), mig.gpu_instance_id, mig.compute_instance_id)
        env = tuple((k, mig.uuid if k == "NVIDIA_VISIBLE_DEVICES" else v) for k, v in device.env)
        return replace(device, device_nodes=(*device.device_nodes, *caps), env=env)

    def unprepare_device(self, device: FoundDevice) -> None:
        """Destroy the instance :meth:`prepare_device` made for a MIG placement (none
        there: done already). Raises PrepareError."""
        a, key = device.attributes, _placement(device)
        if key is None:
            return
        try:
            self._nvml().destroy_mig(*key)
        except (NvmlError, NvmlUnavailable) as e:
            raise PrepareError(f"destroying MIG {a['profile']} at {a['placement_start']}: {e}") from None
        with self._lock:
            self._instances.pop(key, None)
            self._claimed.discard(key)

    def _nvml(self) -> Nvml:
        nvml = self._open()
        if nvml is None:
            raise NvmlUnavailable(self._unavailable or "NVML is not open")
        return nvml

    # -- health -------------------------------------------------------------------------
    def refresh(self, device: FoundDevice, host: HostRoot) -> FoundDevice | str:
        a = device.attributes
        if a.get("vendor") != "10de":
            return pci_problem(host, a["pci_address"], a.get("driver", "")) or device
        if a.get("pci_address") and not os.path.isdir(host.sys / "bus/pci/devices" / a["pci_address"]):
            return Gone("PCI device gone from sysfs")
        return self._nvidia_health(device)


def _placement(device: FoundDevice) -> tuple[str, int, int] | None:
    """(GPU UUID, GPU-instance profile, placement start) of a MIG placement; None for
    any other device."""
    a = device.attributes
    if not a.get("placement_start"):
        return None
    return a["uuid"], int(a["mig_profile_id"]), int(a["placement_start"])
