"""One resource's devices, their health, and what a container gets: no gRPC here.

A physical device found by a kind becomes ``replicas`` kubelet devices (IDs ``<id>``, or
``<id>::<n>`` when shared). Health is kept per physical device; every change bumps a
version and wakes ListAndWatch streams, which send a full snapshot.
"""

from __future__ import annotations

import hashlib
import logging
import os
import string
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from nfd.devices.config import ResourceConfig
from nfd.devices.kinds.model import (
    MAX_ID_LEN,
    DeviceNode,
    FoundDevice,
    HealthChange,
    Mount,
    cdi_name,
    host_file,
)
from nfd.features import Features
from nfd.hostroot import HostRoot

log = logging.getLogger("nfd.deviceplugin")

REPLICA_SEP = "::"


class AllocationError(Exception):
    """A request kubelet must not get: ``code`` is a gRPC status name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class DeviceStatus:
    id: str
    healthy: bool
    numa_node: int | None


@dataclass
class ContainerEdits:
    """What one container gets for its devices (becomes a ContainerAllocateResponse)."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    devices: list[DeviceNode] = field(default_factory=list)
    cdi_devices: list[str] = field(default_factory=list)


def short_id(pid: str, room: int) -> str:
    """kubelet takes IDs of at most 63 characters: keep a readable head plus a hash."""
    if len(pid) <= room:
        return pid
    digest = hashlib.sha256(pid.encode()).hexdigest()[:10]
    return pid[: room - 11] + "-" + digest


class ResourceState:
    def __init__(self, res: ResourceConfig, found: Sequence[FoundDevice], host: HostRoot) -> None:
        self.res = res
        self.host = host
        self._base = list(found)
        self._eff = [self._compose(d) for d in self._base]
        self._reason: list[str | None] = [None] * len(found)
        self._since = [time.time()] * len(found)  # when each device's health last changed
        room = MAX_ID_LEN - (len(REPLICA_SEP) + len(str(res.replicas - 1)) if res.replicas > 1 else 0)
        self.physical_ids = [short_id(d.id, room) for d in self._base]
        self.slots: list[tuple[str, int]] = []
        for i, pid in enumerate(self.physical_ids):
            if res.replicas == 1:
                self.slots.append((pid, i))
            else:
                self.slots.extend((f"{pid}{REPLICA_SEP}{n}", i) for n in range(res.replicas))
        self._index = {sid: i for sid, i in self.slots}
        self._cond = threading.Condition()
        self.version = 0
        self._kicks = 0
        self.closed = False
        # Called (outside the lock) when a device's edits changed (a re-plugged USB device
        # got a new node): the CDI spec must follow.
        self.on_edits_changed: Callable[[ResourceState], None] | None = None
        # Called outside the lock, on the thread that saw it, when health changed (HealthMonitor fans it out).
        self.on_health_changed: Callable[[ResourceState, list[HealthChange]], None] | None = None
        # The host-side templates and their placeholders, parsed once for every health check.
        self._host_templates = tuple(
            (path, tuple(_fields(path)))
            for path in (*(t.host_path for t in res.device_nodes), *(m.host_path for m in res.mounts))
        )
        self.refresh()

    # -- building ----------------------------------------------------------------------
    def _compose(self, d: FoundDevice) -> FoundDevice:
        """The kind's device plus the resource's templated nodes, mounts and env. A
        template whose placeholder this device leaves empty (a PCI device without an
        IOMMU group for ``/dev/vfio/{iommu_group}``) is left out, never half-filled;
        :meth:`_unfilled` makes such a device unhealthy."""
        a = d.attributes
        nodes = {n.container_path: n for n in d.device_nodes}
        for t in self.res.device_nodes:
            host_path, container_path = _fill(t.host_path, a), _fill(t.container_path, a)
            if host_path is not None and container_path is not None:
                nodes.setdefault(container_path, DeviceNode(host_path, container_path, t.permissions))
        mounts = {m.container_path: m for m in d.mounts}
        for mt in self.res.mounts:
            host_path, container_path = _fill(mt.host_path, a), _fill(mt.container_path, a)
            if host_path is not None and container_path is not None:
                mounts.setdefault(container_path, Mount(host_path, container_path, mt.read_only))
        env = d.env + tuple((k, v.format_map(a)) for k, v in self.res.env)
        return replace(d, device_nodes=tuple(nodes.values()), mounts=tuple(mounts.values()), env=env)

    def _unfilled(self, d: FoundDevice) -> str | None:
        """Why a device cannot get its configured nodes or mounts, or None."""
        for path, fields in self._host_templates:
            empty = [f for f in fields if not d.attributes.get(f)]
            if empty:
                return f"{path}: no {', '.join(sorted(empty))} for this device"
        return None

    @property
    def name(self) -> str:
        return self.res.name

    def devices(self) -> list[tuple[str, FoundDevice]]:
        """(physical ID, device with the resource's edits), for CDI specs and --check."""
        with self._cond:
            return list(zip(self.physical_ids, self._eff, strict=True))

    def one(self, i: int) -> tuple[str | None, FoundDevice]:
        """Device ``i``'s reason to be unusable (None: healthy) and its edited form."""
        with self._cond:
            return self._reason[i], self._eff[i]

    def reasons(self) -> list[str | None]:
        with self._cond:
            return list(self._reason)

    def health(self) -> list[tuple[str | None, float]]:
        """Per physical device: (why unusable or None, Unix time of its last change)."""
        with self._cond:
            return list(zip(self._reason, self._since, strict=True))

    def unhealthy(self) -> list[HealthChange]:
        """The devices unhealthy now, as the changes that made them so."""
        with self._cond:
            return [
                HealthChange(self.name, pid, r, t)
                for pid, r, t in zip(self.physical_ids, self._reason, self._since, strict=True)
                if r is not None
            ]

    def found(self) -> list[tuple[str, FoundDevice]]:
        """(physical ID, device as the kind last saw it, without the resource's edits):
        what a new state over some of these devices starts from."""
        with self._cond:
            return list(zip(self.physical_ids, self._base, strict=True))

    # -- health ------------------------------------------------------------------------
    def _check(
        self, base: FoundDevice, eff: FoundDevice
    ) -> tuple[str | None, FoundDevice, FoundDevice | None]:
        """I/O only, no lock: (why unusable or None, the kind's device, its new composed
        form when the kind's view changed)."""
        got = self.res.kind.refresh(base, self.host)
        if isinstance(got, str):
            return got, base, None
        composed = self._compose(got) if got is not base else None
        unfilled = self._unfilled(got)
        if unfilled is not None:
            return unfilled, got, composed
        for n in (composed or eff).device_nodes:
            if not os.path.exists(host_file(self.host, n.host_path)):
                return f"device node {n.host_path} missing", got, composed
        return None, got, composed

    def refresh(self, which: Iterable[int] | None = None) -> bool:
        """Re-check devices (all, or some) now; True when any health changed. The checks
        run outside the lock, so Allocate never waits for a whole poll round."""
        with self._cond:
            idx = list(range(len(self._base)) if which is None else which)
            bases = [self._base[i] for i in idx]
            effs = [self._eff[i] for i in idx]
        results = [self._check(b, e) for b, e in zip(bases, effs, strict=True)]
        changed = edits_changed = False
        changes: list[HealthChange] = []
        now = time.time()
        with self._cond:
            for i, b, (reason, got, composed) in zip(idx, bases, results, strict=True):
                if self._base[i] is not b:
                    continue  # another refresh got there first with newer facts
                if composed is not None:
                    self._base[i], self._eff[i] = got, composed
                    edits_changed = True
                old = self._reason[i]
                if (old is None) != (reason is None):
                    changed = True
                    self._since[i] = now
                    if reason is None:
                        log.info("%s: device %s is healthy again", self.name, self.physical_ids[i])
                    else:
                        log.warning("%s: device %s is unhealthy: %s", self.name, self.physical_ids[i], reason)
                elif old != reason or type(old) is not type(reason):
                    # Still unhealthy, for another reason (or now gone from the host):
                    # a taint says why, so it follows.
                    changed = True
                    log.warning("%s: device %s is unhealthy: %s", self.name, self.physical_ids[i], reason)
                else:
                    continue
                self._reason[i] = reason
                changes.append(HealthChange(self.name, self.physical_ids[i], reason, self._since[i]))
            if changed or edits_changed:
                self.version += 1
                self._cond.notify_all()
        if edits_changed and self.on_edits_changed is not None:
            self.on_edits_changed(self)
        if changes and self.on_health_changed is not None:
            self.on_health_changed(self, changes)
        return changed

    def healthy_slots(self) -> int:
        """How many kubelet devices are usable now (replicas of healthy devices)."""
        with self._cond:
            return sum(1 for _sid, i in self.slots if self._reason[i] is None)

    def snapshot(self) -> tuple[int, list[DeviceStatus]]:
        with self._cond:
            return self.version, [
                DeviceStatus(sid, self._reason[i] is None, self._eff[i].numa_node) for sid, i in self.slots
            ]

    def wait_change(self, seen: int, timeout: float) -> int:
        """Block until the version differs from ``seen`` (or timeout/close); the version."""
        with self._cond:
            kicks = self._kicks
            self._cond.wait_for(lambda: self.version != seen or self.closed or self._kicks != kicks, timeout)
            return self.version

    def kick(self) -> None:
        """Wake every waiter (a stream that should end) without a change."""
        with self._cond:
            self._kicks += 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    # -- allocation --------------------------------------------------------------------
    def _physical(self, ids: Sequence[str]) -> list[int]:
        unknown = [d for d in ids if d not in self._index]
        if unknown:
            raise AllocationError(
                "INVALID_ARGUMENT", f"{self.name}: unknown device IDs: {', '.join(unknown)}"
            )
        return list(dict.fromkeys(self._index[d] for d in ids))

    def _require_healthy(self, ids: Sequence[str]) -> list[int]:
        phys = self._physical(ids)
        # Check now, not at the last poll: a failure here also updates ListAndWatch.
        self.refresh(phys)
        with self._cond:
            bad = [d for d in ids if self._reason[self._index[d]] is not None]
            if bad:
                why = "; ".join(f"{d}: {self._reason[self._index[d]]}" for d in bad)
                raise AllocationError("FAILED_PRECONDITION", f"{self.name}: unhealthy device IDs: {why}")
        return phys

    def allocate(self, ids: Sequence[str]) -> ContainerEdits:
        phys = self._require_healthy(ids)
        out = ContainerEdits()
        with self._cond:
            devs = [self._eff[i] for i in phys]
        joined: dict[str, list[str]] = {}
        for d in devs:
            for k, v in d.env:
                vals = joined.setdefault(k, [])
                if v not in vals:
                    vals.append(v)
        out.envs = {k: ",".join(v) for k, v in joined.items()}
        if self.res.cdi_kind:
            # Nodes and mounts travel in the CDI spec; env stays here because several
            # devices' values of one variable must be joined, which CDI cannot express.
            out.cdi_devices = [f"{self.res.cdi_kind}={cdi_name(self.physical_ids[i])}" for i in phys]
            return out
        seen_nodes: set[str] = set()
        seen_mounts: set[str] = set()
        for d in devs:
            for n in d.device_nodes:
                if n.container_path not in seen_nodes:
                    seen_nodes.add(n.container_path)
                    out.devices.append(n)
            for m in d.mounts:
                if m.container_path not in seen_mounts:
                    seen_mounts.add(m.container_path)
                    out.mounts.append(m)
        return out

    def pre_start(self, ids: Sequence[str]) -> None:
        self._require_healthy(ids)

    def numa_of(self, sid: str) -> int | None:
        i = self._index.get(sid)
        return None if i is None else self._eff[i].numa_node

    def physical_of(self, sid: str) -> int | None:
        return self._index.get(sid)


def _fields(template: str) -> list[str]:
    return [f for _lit, f, _spec, _conv in string.Formatter().parse(template) if f]


def _fill(template: str, attrs: Mapping[str, str]) -> str | None:
    """The template filled from ``attrs``; None when a placeholder it uses is empty."""
    if any(not attrs.get(f) for f in _fields(template)):
        return None
    return template.format_map(attrs)


def build_states(
    resources: Iterable[ResourceConfig], *, features: Features, host: HostRoot
) -> tuple[list[ResourceState], list[str]]:
    """Discover every resource's devices; also the warnings for selectors that match
    nothing (a config shared by different nodes is normal, so these are not errors)."""
    states: list[ResourceState] = []
    warnings: list[str] = []
    for res in resources:
        found = res.kind.discover(res.selector, resource=res.name, features=features, host=host)
        unmatched = getattr(res.kind, "unmatched", None)
        if callable(unmatched):
            for g in unmatched(res.selector, host):
                warnings.append(f"{res.where}.{res.kind.name}: {g} matches no device node")
        if not found:
            warnings.append(
                f"{res.where}: {res.name}: no device matches {res.kind.describe(res.selector)}; not served"
            )
        states.append(ResourceState(res, found, host))
    return states, warnings


def device_key(d: FoundDevice) -> str:
    """What identifies the hardware behind a device across kinds: a GPU kind's device and
    a pci kind's device on the same function are one device."""
    a = d.attributes
    return a.get("pci_address") or a.get("address") or a.get("path") or d.id


def build_served_states(
    resources: Sequence[ResourceConfig], served_by: str, *, features: Features, host: HostRoot
) -> tuple[list[ResourceState], list[str]]:
    """The states of the resources served ``served_by`` (``devicePlugin`` or ``dra``),
    with their warnings, after checking that no device is selected by a resource of the
    other way too: a device is offered once (ConfigError naming both resources)."""
    from nfd.settings import ConfigError

    states, warnings = build_states(resources, features=features, host=host)
    owner: dict[str, ResourceState] = {}
    for s in states:
        for _pid, d in s.devices():
            other = owner.setdefault(device_key(d), s)
            if other is not s and other.res.served_by != s.res.served_by:
                s.close()
                raise ConfigError(
                    f"{s.res.where}: {s.name} ({s.res.served_by}) selects device {device_key(d)},"
                    f" which {other.res.where} ({other.name}, {other.res.served_by}) serves too;"
                    " a device is served one way only"
                )
    mine = [s for s in states if s.res.served_by == served_by]
    for s in states:
        if s.res.served_by != served_by:
            s.close()
    others = [r.where for r in resources if r.served_by != served_by]
    return mine, [w for w in warnings if not any(w.startswith((o + ":", o + ".")) for o in others)]


def close_states(states: Iterable[ResourceState]) -> None:
    """Close each state, then each kind once: kinds holding resources (an NVML handle,
    an event thread) may offer ``close()``."""
    states = list(states)
    for s in states:
        s.close()
    for kind in {id(s.res.kind): s.res.kind for s in states}.values():
        close = getattr(kind, "close", None)
        if callable(close):
            try:
                close()
            except Exception as e:  # shutting down: log and go on
                log.warning("closing device kind %s: %s: %s", kind.name, type(e).__name__, e)
