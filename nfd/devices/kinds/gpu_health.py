"""Health of the NVIDIA devices the GPU device kind serves: a critical XID error (from
NVML's event thread) marks the GPU, or just the MIG device it names, unhealthy; NVML is
asked every ``checkInterval`` seconds; a device is healthy again once NVML answers for it
``recoverAfter`` seconds after its last error."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nfd.devices.kinds.gpu_selector import GpuSelector
from nfd.devices.kinds.model import FoundDevice
from nfd.hw.nvml import NO_INSTANCE, Nvml, NvmlError, NvmlUnavailable, XidEvent
from nfd.loopthread import LoopThread

log = logging.getLogger("nfd.deviceplugin")


@dataclass
class _Health:
    """What the kind knows about one NVIDIA device (GPU or MIG) between polls."""

    xid: int | None = None
    xid_at: float = 0.0
    checked_at: float | None = None
    problem: str | None = None  # NVML's answer at the last check


@dataclass
class NvmlHealth:
    """The NVML side of :class:`nfd.devices.kinds.gpu.GpuKind`: the adapter, what each
    served device's selector says about health, and the event thread. ``clock`` is for
    tests."""

    clock: Callable[[], float] = time.monotonic
    # How long one NVML event wait blocks; bounds how long close() takes.
    event_wait: float = 1.0
    # Seconds without a health refresh after which the event thread stops (real time).
    idle_stop: float = 60.0

    _adapter: Nvml | None = field(default=None, init=False, repr=False)
    _health: dict[str, _Health] = field(default_factory=dict, init=False, repr=False)
    # (parent uuid, gpu instance, compute instance) -> MIG uuid, for XID events on MIG.
    _mig_places: dict[tuple[str, int, int], str] = field(default_factory=dict, init=False, repr=False)
    _children: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False)
    _policy: dict[str, GpuSelector] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _watch_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _watcher: LoopThread | None = field(default=None, init=False, repr=False)
    _watched: list[str] = field(default_factory=list, init=False, repr=False)
    _events_broken: bool = field(default=False, init=False, repr=False)
    _last_refresh: float = field(default=0.0, init=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)

    def _watch(self, nvml: Nvml, uuids: list[str]) -> None:
        with self._lock:
            self._watched.extend(u for u in uuids if u not in self._watched)
        self._last_refresh = time.monotonic()
        self._ensure_watcher()

    def _ensure_watcher(self) -> None:
        """Run the event thread while someone asks for health. It stops by itself after
        ``idle_stop`` seconds without a refresh (a one-off look at the devices, as the
        worker's view of served resources takes, must not leave a thread behind) and
        starts again, re-registering for events, at the next refresh."""
        nvml = self._adapter
        # Health polls and Allocate calls refresh from different threads: one starts it.
        with self._watch_lock:
            with self._lock:
                if nvml is None or not self._watched or self._stop.is_set():
                    return
                if self._watcher is not None and self._watcher.is_alive():
                    return
                uuids = list(self._watched)
            try:
                nvml.watch(uuids)
            except (NvmlUnavailable, NvmlError) as e:
                if not self._events_broken:
                    log.warning("NVML events unavailable, health from periodic NVML checks only: %s", e)
                    self._events_broken = True
                return

            def events() -> float | None:
                return self._events(nvml, watcher)

            watcher = LoopThread("nfd-dp-nvml", events, interval=0.0, join_timeout=3, logger=log)
            with self._lock:
                self._watcher = watcher
            watcher.start()

    def _events(self, nvml: Nvml, watcher: LoopThread) -> float | None:
        """One wait for an NVML event (a round of the event thread)."""
        if time.monotonic() - self._last_refresh > self.idle_stop:
            log.debug("nobody asks for GPU health: NVML event thread stops")
            nvml.close()
            watcher.end()
            return None
        try:
            event = nvml.wait_event(self.event_wait)
        except (NvmlUnavailable, NvmlError) as e:
            # As NVIDIA's plugin does: an event stream that fails says nothing good
            # about any GPU. Each recovers once NVML answers for it again.
            log.warning("NVML event wait failed, marking NVIDIA devices unhealthy: %s", e)
            with self._lock:
                for uuid in list(self._policy):
                    self._mark(uuid, 0)
            return 1.0
        if event is not None:
            self.on_xid(event)
        return None

    def on_xid(self, event: XidEvent) -> None:
        """Record a critical XID error (called by the event thread; public for tests)."""
        with self._lock:
            sel = self._policy.get(event.uuid) or next(
                (self._policy[k] for k in self._children.get(event.uuid, []) if k in self._policy), None
            )
            if sel is not None and event.xid in sel.ignore_xids:
                log.info("XID %d on %s is an application error; device stays healthy", event.xid, event.uuid)
                return
            if event.gpu_instance_id != NO_INSTANCE and event.compute_instance_id != NO_INSTANCE:
                mig = self._mig_places.get((event.uuid, event.gpu_instance_id, event.compute_instance_id))
                targets = [mig] if mig else [event.uuid, *self._children.get(event.uuid, [])]
            else:
                targets = [event.uuid, *self._children.get(event.uuid, [])]
            for uuid in targets:
                self._mark(uuid, event.xid)
        log.warning("XID %d on %s: marking %s unhealthy", event.xid, event.uuid, ", ".join(targets))

    def _mark(self, uuid: str, xid: int) -> None:
        h = self._health.setdefault(uuid, _Health())
        h.xid, h.xid_at = xid, self.clock()

    def _nvidia_health(self, device: FoundDevice) -> FoundDevice | str:
        self._last_refresh = time.monotonic()
        self._ensure_watcher()
        uuid = device.attributes["uuid"]
        sel = self._policy.get(uuid)
        now = self.clock()
        with self._lock:
            h = self._health.setdefault(uuid, _Health())
            xid, xid_at, checked_at = h.xid, h.xid_at, h.checked_at
        recover_after = sel.recover_after if sel else 30.0
        interval = sel.check_interval if sel else 10.0
        due = checked_at is None or now - checked_at >= interval
        if (
            xid is not None
            and now - xid_at >= recover_after
            and (checked_at is None or checked_at < xid_at + recover_after)
        ):
            due = True  # the quiet period is over: ask NVML now rather than at the next tick
        if due:
            problem = self._check(uuid)
            with self._lock:
                h.checked_at, h.problem = now, problem
                if problem is None and h.xid is not None and now - h.xid_at >= recover_after:
                    log.info("%s answers NVML again after XID %d", uuid, h.xid)
                    h.xid = None
        with self._lock:
            if h.problem is not None:
                return f"NVML: {h.problem}"
            if h.xid is not None:
                return "NVML event stream failed" if h.xid == 0 else f"XID {h.xid}"
        return device

    def _check(self, uuid: str) -> str | None:
        nvml = self._adapter
        if nvml is None:
            return "NVML not open"
        try:
            return nvml.check(uuid)
        except (NvmlUnavailable, NvmlError) as e:
            return str(e)

    def close(self) -> None:
        """Stop the event thread and release NVML."""
        self._stop.set()  # and no new event thread
        if self._watcher is not None:
            self._watcher.stop()
        if self._adapter is not None:
            self._adapter.close()
