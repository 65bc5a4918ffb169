"""The ``gpu`` selector of a device resource: vendor, drivers, MIG profiles, MIG
partitioning, and how NVML health treats NVIDIA's devices (``recoverAfter``, ``checkInterval``, ``ignoreXids``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nfd.devices.kinds.shared import mapping, optional_strings, string_list
from nfd.settings import ConfigError

_KEYS = ("vendor", "driver", "migProfile", "migPartitions", "recoverAfter", "checkInterval", "ignoreXids")
VENDORS = ("nvidia", "amd", "intel")
# XIDs that are application errors: the GPU stays usable (NVIDIA's plugin ignores these).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
_PROFILE = re.compile(r"^(\d+c\.)?\d+g\.\d+gb([+-][a-z]+(\.[a-z]+)*)?$|^\*$")


@dataclass(frozen=True)
class GpuSelector:
    vendor: str
    drivers: tuple[str, ...] = ()
    mig_profiles: tuple[str, ...] = ()  # () = full GPUs; "*" = every MIG device
    # DRA only: publish a GPU in MIG mode whole and as every MIG placement, sharing its
    # counters; a claim's MIG device is created at prepare. Off: as the device plugin.
    mig_partitions: bool = False
    recover_after: float = 30.0
    check_interval: float = 10.0
    ignore_xids: frozenset[int] = APPLICATION_XIDS


def parse_selector(raw: Any, where: str) -> GpuSelector:
    m = mapping(raw, where, _KEYS)
    vendor = m.get("vendor")
    if vendor not in VENDORS:
        raise ConfigError(f"{where}.vendor: required, one of {', '.join(VENDORS)}")
    drivers = optional_strings(m, "driver", where)
    profiles: tuple[str, ...] = ()
    if "migProfile" in m:
        if vendor != "nvidia":
            raise ConfigError(f"{where}.migProfile: MIG devices are NVIDIA's; vendor is {vendor}")
        profiles = string_list(m["migProfile"], f"{where}.migProfile")
        for p in profiles:
            if not _PROFILE.match(p):
                raise ConfigError(f"{where}.migProfile: {p!r} is not a MIG profile like 1g.10gb (or *)")
    partitions = m.get("migPartitions", False)
    if not isinstance(partitions, bool):
        raise ConfigError(f"{where}.migPartitions: expected true or false")
    if partitions and (vendor != "nvidia" or profiles):
        raise ConfigError(
            f"{where}.migPartitions: for vendor nvidia without migProfile (partitions offer every profile)"
        )
    nvidia_only = [k for k in ("recoverAfter", "checkInterval", "ignoreXids") if k in m]
    if nvidia_only and vendor != "nvidia":
        raise ConfigError(f"{where}.{nvidia_only[0]}: NVML health applies to vendor nvidia only")
    xids = m.get("ignoreXids") or []
    if not isinstance(xids, list):
        raise ConfigError(f"{where}.ignoreXids: expected a list of XID numbers")
    ignore = set(APPLICATION_XIDS)
    for x in xids:
        if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
            raise ConfigError(f"{where}.ignoreXids: {x!r} is not an XID number")
        ignore.add(x)
    return GpuSelector(
        vendor=vendor,
        drivers=drivers,
        mig_profiles=profiles,
        mig_partitions=partitions,
        recover_after=_seconds(m.get("recoverAfter", 30), f"{where}.recoverAfter"),
        check_interval=_seconds(m.get("checkInterval", 10), f"{where}.checkInterval"),
        ignore_xids=frozenset(ignore),
    )


def _seconds(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
        raise ConfigError(f"{where}: expected a number of seconds (0 or more)")
    return float(raw)
