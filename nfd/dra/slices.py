"""The DRA view of the inventory: stable device names, and the pool's ResourceSlices.

One pool per node, named after the node. A pool larger than a slice's limit (128
devices, 64 when one is tainted) is split over several slices, all carrying the pool's generation and how many
slices it has; a consumer takes only the newest generation's slices.

An unhealthy device stays in its slice with a taint (``<driver>/unhealthy``, the reason
as its value) that keeps new claims off it (``NoSchedule``) or also evicts the pods
using it (``NoExecute``); the taint goes when the device is healthy again. A device gone
from the host (:class:`nfd.devices.kinds.model.Gone`) is withdrawn, and so is every unhealthy
device when no taint policy is given (an API server without device taints).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nfd.devices.inventory import ResourceState
from nfd.devices.kinds.model import FoundDevice, Gone, Partition
from nfd.dra.attributes import AttributeSource
from nfd.features import Features
from nfd.hostroot import HostRoot

MAX_DEVICES_PER_SLICE = 128
MAX_TAINTED_DEVICES_PER_SLICE = 64  # also when any consumes counters
MAX_COUNTER_SETS_PER_SLICE = 8
MAX_NAME = 253
MAX_LABEL_VALUE = 63
_NOT_LABEL = re.compile(r"[^a-z0-9-]+")
_NOT_LABEL_VALUE = re.compile(r"[^A-Za-z0-9_.-]+")
UNHEALTHY_TAINT = "unhealthy"  # the taint's key name, under the driver's domain


def taint_value(reason: str) -> str:
    """A label value saying why (``driver vfio-pci unbound`` ->
    ``driver-vfio-pci-unbound``): at most 63 characters, alphanumeric at both ends."""
    value = _NOT_LABEL_VALUE.sub("-", reason)[:MAX_LABEL_VALUE]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value) or UNHEALTHY_TAINT


def rfc3339(t: float) -> str:
    """Whole seconds, as the API server stores a time: what we write reads back equal."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass(frozen=True)
class TaintPolicy:
    """How an unhealthy device is tainted."""

    key: str  # <driver>/unhealthy
    effect: str  # NoSchedule or NoExecute

    @classmethod
    def for_driver(cls, driver: str, effect: str) -> TaintPolicy:
        return cls(f"{driver}/{UNHEALTHY_TAINT}", effect)

    def taint(self, reason: str, since: float) -> dict[str, Any]:
        return {
            "key": self.key,
            "value": taint_value(reason),
            "effect": self.effect,
            "timeAdded": rfc3339(since),
        }


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
    partition: Partition | None = None

    def api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "attributes": self.attributes}
        if self.capacity:
            out["capacity"] = self.capacity
        if self.partition is not None:
            out["consumesCounters"] = [
                {
                    "counterSet": self.partition.counter_set,
                    "counters": {k: {"value": v} for k, v in sorted(self.partition.consumes.items())},
                }
            ]
        return out


class DraInventory:
    """Every DRA resource's devices under their names, with health from the states.

    :meth:`replace` swaps in a new discovery's states (a device plugged in after the
    start); readers always see one whole view."""

    def __init__(self, states: Sequence[ResourceState], *, features: Features, host: HostRoot) -> None:
        self._lock = threading.Lock()
        self._swaps = 0
        self.host = host
        self.states, self.by_name = self._index(states, features, host)

    @staticmethod
    def _index(
        states: Sequence[ResourceState], features: Features, host: HostRoot
    ) -> tuple[list[ResourceState], dict[str, DraDevice]]:
        src = AttributeSource(features, host)
        by_name: dict[str, DraDevice] = {}
        for s in states:
            for i, (pid, d) in enumerate(s.devices()):
                name = d.partition.name if d.partition is not None else device_name(s.name, pid)
                if name in by_name:
                    raise ValueError(
                        f"{s.res.where}: device {pid} is also served as {name} by"
                        f" {by_name[name].state.name}; a device is served once"
                    )
                attrs, cap = src.build(resource=s.name, kind=s.res.kind.name, device=d)
                by_name[name] = DraDevice(name, s, i, attrs, cap, d.partition)
        return list(states), by_name

    def devices_of(self) -> set[tuple[str, str]]:
        """(resource, device ID) of every device, healthy or not."""
        with self._lock:
            return {(s.name, pid) for s in self.states for pid in s.physical_ids}

    def replace(
        self, states: Sequence[ResourceState], *, features: Features, host: HostRoot
    ) -> list[ResourceState]:
        """Serve ``states`` from now on; the states no longer served (to be closed)."""
        new_states, by_name = self._index(states, features, host)
        with self._lock:
            old = [s for s in self.states if all(s is not n for n in new_states)]
            self.states, self.by_name, self.host = new_states, by_name, host
            self._swaps += 1
        return old

    def version(self) -> tuple[int, ...]:
        with self._lock:
            return (self._swaps, *(s.version for s in self.states))

    def published(self, taints: TaintPolicy | None) -> list[dict[str, Any]]:
        """The devices to publish now, sorted by name: the healthy ones, and the
        unhealthy ones still on the host tainted (withdrawn when ``taints`` is None)."""
        with self._lock:
            states, by_name = self.states, self.by_name
        health = {id(s): s.health() for s in states}
        out = []
        for _n, d in sorted(by_name.items()):
            reason, since = health[id(d.state)][d.index]
            if reason is None:
                out.append(d.api())
            elif taints is not None and not isinstance(reason, Gone):
                out.append({**d.api(), "taints": [taints.taint(reason, since)]})
        return out

    def counter_sets(self) -> list[dict[str, Any]]:
        """The partitionable devices' counter sets (``spec.sharedCounters``), by name,
        less what the partitions no claim holds but that are made already consume (a MIG
        instance an admin made by hand): the scheduler counts only its allocations."""
        sets: dict[str, dict[str, str]] = {}
        for d in self._hooked("unclaimed_instance"):
            if d.partition is not None:
                sets[d.partition.counter_set] = _less(
                    sets.get(d.partition.counter_set, d.partition.totals), d.partition.consumes
                )
        with self._lock:
            parts = [d.partition for d in self.by_name.values() if d.partition is not None]
        for p in parts:
            sets.setdefault(p.counter_set, dict(p.totals))
        return [
            {"name": n, "counters": {k: {"value": v} for k, v in sorted(c.items())}}
            for n, c in sorted(sets.items())
        ]

    def unclaimed(self) -> list[str]:
        """The devices made already that no claim holds (see :meth:`counter_sets`)."""
        return [d.name for d in self._hooked("unclaimed_instance")]

    def _hooked(self, hook: str, names: Iterable[str] | None = None) -> list[DraDevice]:
        """The devices (all, or those named) whose kind's ``hook`` says yes of them."""
        with self._lock:
            by_name = self.by_name
        out = []
        for n in sorted(by_name) if names is None else names:
            d = by_name.get(n)
            check = getattr(d.state.res.kind, hook, None) if d is not None else None
            if d is not None and check is not None and check(d.state.devices()[d.index][1]):
                out.append(d)
        return out

    def adopt(self, names: Iterable[str]) -> list[str]:
        """Prepared claims' devices after a restart: those whose kind finds what their
        prepare made still there and takes it back (a MIG instance)."""
        return [d.name for d in self._hooked("adopt_device", names)]

    def makes(self, name: str) -> bool:
        """Whether :meth:`prepare_device` makes something of the device (a MIG instance)."""
        with self._lock:
            d = self.by_name.get(name)
        kind = d.state.res.kind if d is not None else None
        if d is None or getattr(kind, "prepare_device", None) is None:
            return False
        check = getattr(kind, "makes", None)
        return check is None or bool(check(d.state.devices()[d.index][1]))

    def prepare_device(self, name: str, device: FoundDevice) -> FoundDevice:
        """What the device's kind makes of it at prepare (a MIG instance created); the
        device itself for kinds that make nothing."""
        with self._lock:
            d, host = self.by_name.get(name), self.host
        hook = getattr(d.state.res.kind, "prepare_device", None) if d is not None else None
        return device if hook is None else hook(device, host)

    def unprepare_device(self, name: str) -> None:
        """Undo :meth:`prepare_device` (a device no longer here: nothing to undo)."""
        with self._lock:
            d = self.by_name.get(name)
        hook = getattr(d.state.res.kind, "unprepare_device", None) if d is not None else None
        if d is not None and hook is not None:
            hook(d.state.devices()[d.index][1])

    def health(self) -> list[tuple[str, str | None]]:
        """(device name, why unusable or None) of every device, sorted by name."""
        with self._lock:
            states, by_name = self.states, self.by_name
        reasons = {id(s): s.reasons() for s in states}
        return [(n, reasons[id(d.state)][d.index]) for n, d in sorted(by_name.items())]

    def describe(self, name: str) -> tuple[FoundDevice, dict[str, Any], HostRoot] | None:
        """The device under this name with its slice attributes and the host it is on."""
        with self._lock:
            d, host = self.by_name.get(name), self.host
        return None if d is None else (d.state.devices()[d.index][1], d.attributes, host)

    def usable(self, name: str) -> tuple[FoundDevice | None, str | None]:
        """The device with the resource's edits, or why it cannot be prepared."""
        with self._lock:
            d = self.by_name.get(name)
        if d is None:
            return None, f"device {name} is not on this node"
        d.state.refresh([d.index])
        reason, dev = d.state.one(d.index)
        if reason is not None:
            return None, f"device {name} is unhealthy: {reason}"
        return dev, None


def pool_slices(
    devices: Sequence[dict[str, Any]],
    *,
    driver: str,
    node: str,
    generation: int,
    counter_sets: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The pool as ResourceSlice objects (an empty pool is one slice without devices:
    it tells the scheduler the node has none, rather than nothing). Counter sets go in
    slices of their own after the devices': the API allows no devices next to them."""
    # The API server allows fewer devices in a slice when any of them is tainted or
    # consumes counters.
    limited = any(d.get("taints") or d.get("consumesCounters") for d in devices)
    per_slice = MAX_TAINTED_DEVICES_PER_SLICE if limited else MAX_DEVICES_PER_SLICE
    chunks = [{"devices": list(devices[i : i + per_slice])} for i in range(0, len(devices), per_slice)]
    chunks = chunks or [{"devices": []}]
    step = MAX_COUNTER_SETS_PER_SLICE
    chunks += [
        {"sharedCounters": list(counter_sets[i : i + step])} for i in range(0, len(counter_sets), step)
    ]
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": slice_name(node, driver, i)},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": len(chunks)},
                **chunk,
            },
        }
        for i, chunk in enumerate(chunks)
    ]


def pool_now(inventory: DraInventory, *, driver: str, node: str, taint_effect: str) -> list[dict[str, Any]]:
    """The slices the pool would be published as now, at generation 1: what
    ``nfd dra --check`` prints."""
    return pool_slices(
        inventory.published(TaintPolicy.for_driver(driver, taint_effect)),
        driver=driver,
        node=node,
        generation=1,
        counter_sets=inventory.counter_sets(),
    )


_QUANTITY = re.compile(r"^(\d+)(Mi|Gi)?$")


def _less(totals: Mapping[str, str], used: Mapping[str, str]) -> dict[str, str]:
    """``totals`` less ``used``, counter by counter, in whole units (never below 0); the
    quantities are those a kind writes: a count, or MiB as ``<n>Mi`` or ``<n>Gi``."""
    out = dict(totals)
    for k, q in used.items():
        have, take = _QUANTITY.match(out.get(k, "")), _QUANTITY.match(q)
        if have is None or take is None:
            continue
        scale = {None: 1, "Mi": 1, "Gi": 1024}
        left = max(0, int(have[1]) * scale[have[2]] - int(take[1]) * scale[take[2]])
        if have[2] is None:
            out[k] = str(left)
        else:
            out[k] = f"{left // 1024}Gi" if left % 1024 == 0 and left else f"{left}Mi"
    return out
