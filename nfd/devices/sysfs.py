"""Small sysfs helpers shared by the device kinds (all paths through HostRoot)."""

from __future__ import annotations

import os
from pathlib import Path

StrPath = str | os.PathLike[str]


def read_attr(path: StrPath) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def numa_value(text: str | None) -> int | None:
    """sysfs ``numa_node``: ``-1`` (or nothing) means the device has no NUMA affinity."""
    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        return None
    return n if n >= 0 else None


def numa_above(sysfs_dir: StrPath, sys_root: StrPath) -> int | None:
    """The NUMA node of the nearest ancestor device (resolving sysfs links) that has a
    ``numa_node`` file: a USB device or a char device hangs below a PCI controller."""
    try:
        cur = Path(os.path.realpath(sysfs_dir))
        stop = Path(os.path.realpath(sys_root))
    except OSError:
        return None
    while cur != stop and stop in cur.parents:
        f = cur / "numa_node"
        if f.exists():
            return numa_value(read_attr(f))
        cur = cur.parent
    return None


def link_name(link: StrPath) -> str | None:
    """The name a sysfs link points to (``driver`` -> ``vfio-pci``), or None."""
    try:
        return os.path.basename(os.readlink(link))
    except OSError:
        return None


def driver_name(device_dir: StrPath) -> str | None:
    """The bound driver, or None when unbound."""
    return link_name(os.path.join(device_dir, "driver"))


def list_dir(path: StrPath) -> list[str]:
    """Sorted names in a directory; empty when it is absent."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []
