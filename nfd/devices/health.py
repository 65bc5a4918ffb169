"""Keeps every resource's device health current, and tells whoever listens.

The monitor is the one source of health events in a process: a device turning unhealthy
or healthy again (seen by the poll, or by an Allocate/Prepare re-check) reaches every
:meth:`HealthMonitor.subscribe` listener. The device plugin's ListAndWatch, the DRA
driver's slices, health stream and Node events, and the metrics all follow it.

A cheap poll (a few stat/readlink calls per device) runs every ``interval`` seconds; when
the kernel's uevents can be had (:mod:`nfd.uevents`; real /sys, netlink allowed), an event
for a subsystem the kinds care about, or uevents lost to an overrun, triggers a re-check
of every device at once instead of at the next tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from nfd.devices.inventory import ResourceState
from nfd.devices.kinds.model import HealthChange
from nfd.loopthread import LoopThread
from nfd.uevents import UeventListener, UeventsUnavailable, pyudev_monitor

log = logging.getLogger("nfd.deviceplugin")

# (the resource, its devices whose health changed). Called on the thread that saw the
# change (the poll, or a gRPC call re-checking a device): it must not block.
HealthListener = Callable[[ResourceState, Sequence[HealthChange]], None]


class HealthMonitor:
    def __init__(
        self,
        states: Sequence[ResourceState],
        *,
        interval: float = 0.2,
        use_udev: bool = True,
        open_monitor: Callable[[], Any] = pyudev_monitor,
        uevents_sys: str = "/sys",
    ) -> None:
        self._listeners: list[HealthListener] = []
        self._states: list[ResourceState] = []
        self.states = list(states)
        self.interval = interval
        self._loop = LoopThread("nfd-dp-health", self._check, interval=interval, join_timeout=2, logger=log)
        self._uevents: UeventListener | None = None
        self._use_udev = use_udev
        self._open_monitor = open_monitor
        self._uevents_sys = uevents_sys  # the sys tree whose devices the uevents describe

    @property
    def states(self) -> list[ResourceState]:
        return self._states

    @states.setter
    def states(self, states: Sequence[ResourceState]) -> None:
        """Watch these states from now on (a rediscovery swaps them); listeners hear of
        the devices that are unhealthy in a state they did not know."""
        known = {id(s) for s in self._states}
        self._states = list(states)
        for s in self._states:
            s.on_health_changed = self._changed
            if id(s) not in known:
                self._changed(s, s.unhealthy())

    def subscribe(self, listener: HealthListener) -> None:
        """``listener`` hears of every change from now on, and at once of each state
        with its devices unhealthy now (possibly none)."""
        self._listeners.append(listener)
        for s in self._states:
            self._call(listener, s, s.unhealthy())

    def _changed(self, state: ResourceState, changes: Sequence[HealthChange]) -> None:
        for listener in list(self._listeners):
            self._call(listener, state, changes)

    @staticmethod
    def _call(listener: HealthListener, state: ResourceState, changes: Sequence[HealthChange]) -> None:
        try:
            listener(state, changes)
        except Exception as e:  # one consumer's bug must not cost the others their events
            log.error("%s: health listener failed: %s: %s", state.name, type(e).__name__, e)

    def start(self) -> None:
        if self._use_udev:
            self._uevents = self._start_uevents()
        self._loop.start()

    def wake(self) -> None:
        self._loop.wake()

    def stop(self) -> None:
        if self._uevents is not None:
            self._uevents.stop()
        self._loop.stop()

    def _check(self) -> None:
        for s in self._states:
            try:
                s.refresh()
            except Exception as e:  # a broken kind must not stop the others' health
                log.error("%s: health check failed: %s: %s", s.name, type(e).__name__, e)

    def _start_uevents(self) -> UeventListener | None:
        subsystems = sorted({sub for s in self.states for sub in s.res.kind.udev_subsystems})
        # uevents describe the real host; with a fixture or relocated /sys they would not
        # match what we read, so only the plain host view listens.
        if not subsystems or any(s.host.sys != self._uevents_sys for s in self.states):
            return None
        listener = UeventListener(
            subsystems,
            on_event=lambda _sub, _action, _dev: self.wake(),
            on_overrun=self.wake,  # a wake re-checks every device: nothing lost stays unseen
            name="nfd-dp-udev",
            open_monitor=self._open_monitor,
        )
        try:
            listener.start()
        except UeventsUnavailable as e:  # no netlink in this sandbox, no libudev ...: polling alone
            log.info("device health: polling every %.0f ms (udev unavailable: %s)", self.interval * 1000, e)
            return None
        log.info(
            "device health: udev events for %s, polling every %.0f ms",
            ", ".join(subsystems),
            self.interval * 1000,
        )
        return listener
