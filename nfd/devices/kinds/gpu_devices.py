"""What the GPU device kind hands out for each device: its template fields, NVIDIA's MIG
capability nodes, and AMD's and Intel's GPUs from their DRM cards."""

from __future__ import annotations

import os
from typing import Any

from nfd.devices.kinds.gpu_selector import GpuSelector
from nfd.devices.model import DeviceNode, FoundDevice
from nfd.hostroot import HostRoot
from nfd.hw.drm import AMD, AMD_DRIVERS, INTEL, INTEL_DRIVERS, drm_cards
from nfd.hw.nvml import GpuInfo

FIELDS = frozenset(
    {
        "uuid",
        "index",
        "minor",
        "pci_address",
        "name",
        "profile",
        "parent_uuid",
        "card",
        "card_node",
        "render_node",
        "vendor",
        "device",
        "driver",
    }
)


def nvidia_attributes(g: GpuInfo, *, uuid: str, profile: str, parent: str) -> dict[str, str]:
    """A full GPU's fields (``profile`` and ``parent`` empty), or those of one of its MIG
    devices."""
    out = dict.fromkeys(FIELDS, "")
    out.update(
        uuid=uuid,
        index=str(g.index),
        minor=str(g.minor),
        pci_address=g.sysfs_address,
        name=g.name,
        profile=profile,
        parent_uuid=parent,
        vendor="10de",
        device=f"{g.pci_device_id >> 16:04x}" if g.pci_device_id else "",
        driver="nvidia",
    )
    return out


def _cap_minor(path: Any) -> int | None:
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "DeviceFileMinor":
                    return int(value.strip())
    except (OSError, ValueError):
        return None
    return None


def mig_cap_nodes(host: HostRoot, minor: int, gi: int, ci: int) -> tuple[DeviceNode, ...]:
    """The /dev/nvidia-caps nodes that grant access to one MIG device, from the driver's
    capability files in /proc; none when the driver does not show them (the NVIDIA
    container runtime then adds them from NVIDIA_VISIBLE_DEVICES)."""
    base = host.proc / "driver" / "nvidia" / "capabilities" / f"gpu{minor}" / "mig" / f"gi{gi}"
    out = []
    for f in (base / "access", base / f"ci{ci}" / "access"):
        m = _cap_minor(f)
        if m is not None:
            p = f"/dev/nvidia-caps/nvidia-cap{m}"
            out.append(DeviceNode(p, p, "r"))
    return tuple(out)


def drm_devices(sel: GpuSelector, host: HostRoot) -> list[FoundDevice]:
    """AMD or Intel GPUs from their DRM cards: card and render nodes (and /dev/kfd for
    AMD's compute stack)."""
    vendor_id, drivers = (AMD, AMD_DRIVERS) if sel.vendor == "amd" else (INTEL, INTEL_DRIVERS)
    wanted = set(sel.drivers) or set(drivers)
    kfd = (
        [DeviceNode("/dev/kfd", "/dev/kfd", "rw")]
        if sel.vendor == "amd" and os.path.exists(host.dev / "kfd")
        else []
    )
    out: list[FoundDevice] = []
    for c in drm_cards(host):
        if c.get("vendor") != vendor_id or c.get("driver") not in wanted or not c.get("pci_address"):
            continue
        nodes = [DeviceNode(c["card_node"], c["card_node"], "rw")]
        if c.get("render_node"):
            nodes.append(DeviceNode(c["render_node"], c["render_node"], "rw"))
        attrs = dict.fromkeys(FIELDS, "")
        attrs.update({k: v for k, v in c.items() if k in FIELDS})
        numa = c.get("numa_node")
        out.append(
            FoundDevice(
                id=c["pci_address"],
                numa_node=int(numa) if numa is not None else None,
                device_nodes=(*nodes, *kfd),
                attributes=attrs,
            )
        )
    return out
