"""What the GPU device kind hands out for each device: its template fields, NVIDIA's MIG
capability nodes, and AMD's and Intel's GPUs from their DRM cards."""

from __future__ import annotations

import os
from typing import Any

from nfd.devices.kinds.gpu_selector import GpuSelector
from nfd.devices.kinds.model import DeviceNode, FoundDevice, Partition
from nfd.hostroot import HostRoot
from nfd.hw.drm import AMD, AMD_DRIVERS, INTEL, INTEL_DRIVERS, drm_cards
from nfd.hw.nvml import GpuInfo, MigProfileInfo

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
        "mig_profile_id",
        "placement_start",
        "placement_size",
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


# -- MIG partitions -------------------------------------------------------------------------
# A GPU in MIG mode is one counter set: a counter per memory slice (a placement takes the
# slices it spans, so overlapping placements exceed one), and totals of what instances
# share out (memory, multiprocessors, engines), which the whole GPU consumes entirely.
_ENGINES = (
    ("multiprocessors", "multiprocessors"),
    ("copy-engines", "copy_engines"),
    ("decoders", "decoders"),
    ("encoders", "encoders"),
    ("jpeg-engines", "jpegs"),
    ("ofa-engines", "ofas"),
)


def _mib(n: int) -> str:
    return f"{n // 1024}Gi" if n % 1024 == 0 else f"{n}Mi"


def _shares(p: MigProfileInfo) -> dict[str, int]:
    """What one instance of the profile takes of the GPU's totals (memory in MiB)."""
    return {"memory": p.memory_mib, **{name: getattr(p, field) for name, field in _ENGINES}}


def _uses(p: MigProfileInfo, start: int, size: int) -> dict[str, int]:
    return {**{f"memory-slice-{i}": 1 for i in range(start, start + size)}, **_shares(p)}


def mig_partitions(g: GpuInfo) -> list[tuple[Partition, MigProfileInfo | None, int, int]]:
    """The whole GPU and every placement of every profile, as (partition, profile,
    placement start, size); the whole GPU has no profile. Totals are the most any set of
    instances can take: per counter, the largest of (instances x one's share) over the
    profiles, so a full layout of any profile fits and the whole GPU takes it all."""
    slices = max((x.start + x.size for p in g.mig_profiles for x in p.placements), default=0)
    totals: dict[str, int] = {f"memory-slice-{i}": 1 for i in range(slices)}
    for p in g.mig_profiles:
        for name, value in _shares(p).items():
            totals[name] = max(totals.get(name, 0), value * p.instances)
    totals = {k: v for k, v in totals.items() if v > 0}  # a counter is at least 1

    def quantities(used: dict[str, int]) -> dict[str, str]:
        return {k: _mib(v) if k == "memory" else str(v) for k, v in used.items() if v > 0 and k in totals}

    counter_set = f"gpu-{g.index}"
    shown = quantities(totals)
    out: list[tuple[Partition, MigProfileInfo | None, int, int]] = [
        (Partition(counter_set, counter_set, shown, shown), None, 0, slices)
    ]
    for p in g.mig_profiles:
        label = "".join(c for c in p.name.lower() if c.isalnum() or c == "-")  # 1g.5gb+me -> 1g5gbme
        for x in p.placements:
            name = f"{counter_set}-mig-{label}-{x.start}"
            out.append(
                (
                    Partition(name, counter_set, shown, quantities(_uses(p, x.start, x.size))),
                    p,
                    x.start,
                    x.size,
                )
            )
    return out
