"""Huge pages as sysfs shows them (the machine's or a NUMA node's), and a size in KiB as
Kubernetes writes the quantity: the memory source's labels and the topology updater's
zones name huge pages alike."""

from __future__ import annotations

import logging
import os

from nfd import hostfiles

log = logging.getLogger(__name__)

_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def kib_quantity(kib: int) -> str:
    """A size in KiB as Kubernetes writes the quantity: the largest exact binary suffix
    (2048 -> ``2Mi``, 1048576 -> ``1Gi``, 64 -> ``64Ki``)."""
    n, i = kib, 0
    while n and n % 1024 == 0 and i < len(_BINARY_SUFFIXES) - 1:
        n //= 1024
        i += 1
    return f"{n}{_BINARY_SUFFIXES[i]}"


def hugepage_counts(base: str) -> dict[int, int]:
    """Configured huge pages below a sysfs ``hugepages`` directory (the machine's
    ``kernel/mm/hugepages`` or a NUMA node's ``hugepages``): page size in KiB -> page
    count. A size whose count is not a number is left out, and said once."""
    out: dict[int, int] = {}
    for entry in hostfiles.entries(base) or ():
        if not os.path.isdir(os.path.join(base, entry)):
            continue
        size = hostfiles.int_value(entry.removeprefix("hugepages-").removesuffix("kB"))
        if size is None or size <= 0:
            continue
        path = os.path.join(base, entry, "nr_hugepages")
        raw = hostfiles.attr(path)
        total = hostfiles.int_value(raw)
        if total is None:
            if raw is not None:
                log.warning("ignoring %s: not a number", path)
            continue
        out[size] = total
    return out
