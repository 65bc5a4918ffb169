"""The DRA view of the inventory: stable device names, and the pool's ResourceSlices.

One pool per node, named after the node. A pool larger than a slice's limit (128
devices) is split over several slices, all carrying the pool's generation and how many
slices it has; a consumer takes only the newest generation's slices. Devices are
withdrawn while unhealthy and come back when healthy.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nfd.devices.inventory import ResourceState
from nfd.devices.model import FoundDevice
from nfd.dra.attributes import AttributeSource
from nfd.features import Features
from nfd.hostroot import HostRoot

MAX_DEVICES_PER_SLICE = 128
MAX_NAME = 253
_NOT_LABEL = re.compile(r"[^a-z0-9-]+")


def device_name(resource: str, device_id: str) -> str:
    """A DNS label from the resource's short name and the device's ID
    (``example.com/fpga`` + ``0000:3b:00.0`` -> ``fpga-0000-3b-00-0``): the same device
    gets the same name on every start."""
    base = _NOT_LABEL.sub("-", f"{resource.rpartition('/')[2]}-{device_id}".lower()).strip("-")
    if len(base) <= 63:
        return base or "device"
    digest = hashlib.sha256(f"{resource}/{device_id}".encode()).hexdigest()[:10]
    return base[:52].rstrip("-") + "-" + digest


def slice_name(node: str, driver: str, index: int) -> str:
    """Fixed names, so a restarted driver finds and replaces its own slices."""
    base = f"{node}-{driver.replace('.', '-')}"
    if len(base) + 6 > MAX_NAME:
        base = base[:230].rstrip("-.") + "-" + hashlib.sha256(base.encode()).hexdigest()[:10]
    return f"{base}-{index}"


@dataclass(frozen=True)
class DraDevice:
    name: str
    state: ResourceState
    index: int  # in state.devices()
    attributes: dict[str, Any]
    capacity: dict[str, Any]

    def api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "attributes": self.attributes}
        if self.capacity:
            out["capacity"] = self.capacity
        return out


class DraInventory:
    """Every DRA resource's devices under their names, with health from the states."""

    def __init__(self, states: Sequence[ResourceState], *, features: Features, host: HostRoot) -> None:
        self.states = list(states)
        src = AttributeSource(features, host)
        self.by_name: dict[str, DraDevice] = {}
        for s in self.states:
            for i, (pid, d) in enumerate(s.devices()):
                name = device_name(s.name, pid)
                if name in self.by_name:
                    raise ValueError(
                        f"{s.res.where}: device {pid} is also served as {name} by"
                        f" {self.by_name[name].state.name}; a device is served once"
                    )
                attrs, cap = src.build(resource=s.name, kind=s.res.kind.name, device=d)
                self.by_name[name] = DraDevice(name, s, i, attrs, cap)

    def version(self) -> tuple[int, ...]:
        return tuple(s.version for s in self.states)

    def healthy(self) -> list[dict[str, Any]]:
        """The devices to publish now, sorted by name."""
        reasons = {id(s): s.reasons() for s in self.states}
        return [d.api() for n, d in sorted(self.by_name.items()) if reasons[id(d.state)][d.index] is None]

    def usable(self, name: str) -> tuple[FoundDevice | None, str | None]:
        """The device with the resource's edits, or why it cannot be prepared."""
        d = self.by_name.get(name)
        if d is None:
            return None, f"device {name} is not on this node"
        d.state.refresh([d.index])
        reason = d.state.reasons()[d.index]
        if reason is not None:
            return None, f"device {name} is unhealthy: {reason}"
        return d.state.devices()[d.index][1], None


def pool_slices(
    devices: Sequence[dict[str, Any]], *, driver: str, node: str, generation: int
) -> list[dict[str, Any]]:
    """The pool as ResourceSlice objects (an empty pool is one slice without devices:
    it tells the scheduler the node has none, rather than nothing)."""
    chunks = [
        list(devices[i : i + MAX_DEVICES_PER_SLICE]) for i in range(0, len(devices), MAX_DEVICES_PER_SLICE)
    ]
    chunks = chunks or [[]]
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": slice_name(node, driver, i)},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": len(chunks)},
                "devices": chunk,
            },
        }
        for i, chunk in enumerate(chunks)
    ]
