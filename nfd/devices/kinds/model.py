"""What a device kind hands the inventory, the device plugin and DRA: plain data, no
gRPC. It lives with the kinds, which make it, so that the kinds import nothing from the
package above them."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from nfd.hostroot import HostRoot

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
MAX_ID_LEN = 63  # kubelet's limit on a device ID


class Gone(str):
    """A health reason saying the device left the host (unplugged, gone from sysfs), not
    merely that it is unusable now: DRA withdraws such a device from its slice rather
    than tainting it. A kind's ``refresh`` returns one where that is what it saw."""

    __slots__ = ()


class PrepareError(Exception):
    """A kind could not make (or undo) what a device needs at DRA's prepare (a MIG
    instance); the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class HealthChange:
    """One device turning unhealthy (``reason`` set) or healthy again (``reason`` None)."""

    resource: str
    device: str  # the physical device ID
    reason: str | None
    at: float  # Unix time


@dataclass(frozen=True, slots=True)
class DeviceNode:
    """A device node to create in the container (cgroup permissions any of r, w, m). In
    a resource's config its paths may hold a kind's ``{placeholders}``."""

    host_path: str  # as the host sees it: /dev/...
    container_path: str
    permissions: str = "rwm"


@dataclass(frozen=True, slots=True)
class Mount:
    host_path: str
    container_path: str
    read_only: bool = True


@dataclass(frozen=True, slots=True)
class CdiHook:
    """An OCI hook in a CDI spec (a GPU kind may want ``update-ldcache`` and the like)."""

    hook_name: str  # prestart, createRuntime, createContainer, startContainer, poststart, poststop
    path: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CdiEdits:
    """CDI container edits a kind adds beyond the device's nodes and mounts."""

    env: tuple[str, ...] = ()  # "K=V"
    hooks: tuple[CdiHook, ...] = ()


@dataclass(frozen=True, slots=True)
class Partition:
    """Where a device sits on a partitionable one (a MIG placement, or the whole GPU):
    the counter set of the physical device, every counter in it with its total, and how
    much of each this device consumes. Devices whose consumption would exceed a total
    together overlap, and the scheduler never allocates them at once."""

    name: str  # the DRA device name, stable: "gpu-0", "gpu-0-mig-1g5gb-0"
    counter_set: str  # a DNS label, one per physical device: "gpu-0"
    totals: Mapping[str, str]  # counter -> quantity
    consumes: Mapping[str, str]


@dataclass(frozen=True)
class FoundDevice:
    """One physical device a kind found on the node.

    ``attributes`` fill the ``{placeholders}`` of the resource's deviceNodes, mounts and
    env templates (a PCI device has ``address``, ``iommu_group`` ...), and carry what the
    kind needs to re-check the device's health later.
    """

    id: str
    numa_node: int | None = None
    device_nodes: tuple[DeviceNode, ...] = ()
    mounts: tuple[Mount, ...] = ()
    # Per-device env; when a container gets several devices, the values of one name are
    # joined with "," in allocation order (SR-IOV's PCIDEVICE_<RESOURCE> style).
    env: tuple[tuple[str, str], ...] = ()
    cdi: CdiEdits = field(default_factory=CdiEdits)
    attributes: Mapping[str, str] = field(default_factory=dict)
    partition: Partition | None = None  # on a partitionable device, served through DRA


def host_file(host: HostRoot, path: str) -> str:
    """Where a host path (``/dev/...``, ``/sys/...``) is seen from this process. A plain
    string: Allocate re-checks device nodes with it on every call."""
    for prefix, base in (("/dev", host.dev), ("/sys", host.sys), ("/run", host.run), ("/var", host.var)):
        if path == prefix or path.startswith(prefix + "/"):
            rest = path[len(prefix) :].lstrip("/")
            return os.path.join(base, rest) if rest else str(base)
    return path


def env_name(resource: str) -> str:
    """The env-name suffix for a resource: ``example.com/fpga`` -> ``EXAMPLE_COM_FPGA``."""
    return "".join(c if c.isalnum() else "_" for c in resource).upper()


_CDI_NAME = re.compile(r"[A-Za-z0-9_.:-]*")


def cdi_name(pid: str) -> str:
    """A CDI device name from a device ID (letters, digits, '_', '.', ':', '-')."""
    # Most IDs (claim UIDs, PCI addresses, device names) are one already: a prepare
    # names three or more.
    name = pid if _CDI_NAME.fullmatch(pid) else "".join(c if c.isalnum() or c in "_.:-" else "_" for c in pid)
    return name if name[:1].isalnum() else "d" + name
