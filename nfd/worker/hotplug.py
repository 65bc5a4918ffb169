"""PCI and USB hot-plug events.

A monitor is an adapter: it calls ``on_event(reason)`` for each device that comes or
goes, and the worker debounces those into one discovery pass. ``UdevMonitor`` listens to
the kernel's uevents through :mod:`nfd.uevents`; ``FedMonitor`` is fed by hand (tests, and
any other event source one might plug in).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from nfd.uevents import UeventListener, UeventsUnavailable, pyudev_monitor

log = logging.getLogger(__name__)

SUBSYSTEMS = ("pci", "usb")
# "bind"/"unbind" matter too: a device whose driver loads late changes its features.
ACTIONS = frozenset({"add", "remove", "change", "bind", "unbind", "move"})

EventCallback = Callable[[str], None]


class MonitorUnavailable(Exception):
    """Hot-plug events cannot be had here (no libudev, no netlink in this pod ...)."""


class HotplugMonitor(Protocol):
    def start(self, on_event: EventCallback) -> None:
        """Begin delivering events; raises MonitorUnavailable when it cannot."""
        ...

    def stop(self) -> None: ...


class UdevMonitor:
    """The pci and usb subsystems' uevents (:mod:`nfd.uevents`); an overrun (events lost)
    asks for a pass as any event does, and that pass looks at everything."""

    def __init__(
        self, subsystems: tuple[str, ...] = SUBSYSTEMS, *, open_monitor: Callable[[], Any] = pyudev_monitor
    ) -> None:
        self._subsystems = subsystems
        self._open_monitor = open_monitor
        self._listener: UeventListener | None = None

    def start(self, on_event: EventCallback) -> None:
        def event(subsystem: str, action: str, device: str) -> None:
            if action in ACTIONS:
                on_event(f"{subsystem} {action} {device}")

        listener = UeventListener(
            self._subsystems,
            on_event=event,
            on_overrun=lambda: on_event("uevents lost (receive buffer overrun)"),
            name="nfd-udev",
            open_monitor=self._open_monitor,
        )
        try:
            listener.start()
        except UeventsUnavailable as e:
            raise MonitorUnavailable(str(e)) from None
        self._listener = listener

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None


class FedMonitor:
    """A monitor whose events are fed by calling :meth:`feed`."""

    def __init__(self, *, available: bool = True) -> None:
        self._available = available
        self._on_event: EventCallback | None = None
        self._lock = threading.Lock()

    def start(self, on_event: EventCallback) -> None:
        if not self._available:
            raise MonitorUnavailable("this monitor is switched off")
        with self._lock:
            self._on_event = on_event

    def stop(self) -> None:
        with self._lock:
            self._on_event = None

    def feed(self, subsystem: str, action: str, device: str = "") -> None:
        with self._lock:
            cb = self._on_event
        if cb is not None and subsystem in SUBSYSTEMS and action in ACTIONS:
            cb(f"{subsystem} {action} {device}".rstrip())
