"""DRM cards of every vendor from ``/sys/class/drm``: the gpu source's ``gpu.drm``
instances and its ``amd.*``/``intel.*`` labels; the GPU device kind serves AMD and Intel
GPUs from the same cards."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nfd.hostfiles import link_name, list_dir, numa_node, read_line
from nfd.hw.accel_pci import hex_id, presence_labels

if TYPE_CHECKING:
    from nfd.features import Instance, Labels
    from nfd.hostroot import HostPath, HostRoot

AMD = "1002"
INTEL = "8086"
AMD_DRIVERS = frozenset({"amdgpu"})
INTEL_DRIVERS = frozenset({"i915", "xe"})


def drm_cards(host: HostRoot) -> list[Instance]:
    """Every ``/sys/class/drm/cardN`` (not its connectors) with its PCI identity."""
    drm = host.sys / "class" / "drm"
    out: list[Instance] = []
    names = [n for n in list_dir(drm) if n.startswith("card") and n[4:].isdecimal()]
    for name in sorted(names, key=lambda n: int(n[4:])):
        card = drm / name
        dev = card / "device"
        inst: Instance = {"card": name, "card_node": f"/dev/dri/{name}"}
        address = link_name(dev)
        if address:
            inst["pci_address"] = address
        for key, width in (("vendor", 4), ("device", 4), ("subsystem_vendor", 4), ("subsystem_device", 4)):
            v = hex_id(read_line(dev / key), width)
            if v:
                inst[key] = v
        cls = hex_id(read_line(dev / "class"), 6)
        if cls:
            inst["class"] = cls[:4]
        driver = link_name(dev / "driver")
        if driver:
            inst["driver"] = driver
        renders = [n for n in list_dir(dev / "drm") if n.startswith("renderD")]
        if renders:
            inst["render_node"] = f"/dev/dri/{renders[0]}"
        node = numa_node(read_line(dev / "numa_node"))
        if node is not None:
            inst["numa_node"] = str(node)
        memory = _drm_memory_bytes(card, dev)
        if memory is not None:
            inst["memory"] = str(memory // (1024 * 1024))
        out.append(inst)
    return out


def _drm_memory_bytes(card: HostPath, dev: HostPath) -> int | None:
    """Device-local memory as sysfs shows it: amdgpu's ``mem_info_vram_total``; for Intel
    ``lmem_total_bytes`` (i915 builds that have it) or the sum of xe's per-tile
    ``physical_vram_size_bytes``. None when the driver does not say."""
    card_p, dev_p = card, dev
    for path in (dev_p / "mem_info_vram_total", card_p / "lmem_total_bytes", dev_p / "lmem_total_bytes"):
        v = _int(read_line(path))
        if v is not None:
            return v
    tiles = [
        _int(read_line(dev_p / t / "physical_vram_size_bytes"))
        for t in list_dir(dev_p)
        if t.startswith("tile")
    ]
    sizes = [t for t in tiles if t is not None]
    return sum(sizes) if sizes else None


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def drm_labels(cards: list[Instance]) -> Labels:
    """``amd.*`` and ``intel.*`` (``gpu-amd.present`` ... with the source's prefix) for the
    cards that AMD's and Intel's GPU drivers drive."""
    out: Labels = {}
    for vendor, vendor_id, drivers in (("amd", AMD, AMD_DRIVERS), ("intel", INTEL, INTEL_DRIVERS)):
        ours = [c for c in cards if c.get("vendor") == vendor_id and c.get("driver") in drivers]
        out.update(_vendor_labels(vendor, ours))
    return out


def _vendor_labels(vendor: str, cards: list[Instance]) -> Labels:
    if not cards:
        return {}
    out = presence_labels(vendor, len(cards))
    memories = {c.get("memory") for c in cards}
    if len(memories) == 1 and None not in memories:
        out[f"{vendor}.memory"] = str(memories.pop())
    return out
