"""PCI and USB hot-plug events.

A monitor is an adapter: it calls ``on_event(reason)`` for each device that comes or
goes, and the worker debounces those into one discovery pass. ``UdevMonitor`` listens to
the kernel's uevents through pyudev; ``FedMonitor`` is fed by hand (tests, and any other
event source one might plug in).
"""

from __future__ import annotations

import errno
import logging
import os
import select
import threading
from collections.abc import Callable
from typing import Any, Protocol

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
    """Kernel uevents for the pci and usb subsystems, via pyudev.

    The kernel's own uevents (not udevd's) are used: they need no udevd on the host and
    no /run/udev in the pod. A device's sysfs entry exists when its uevent is sent, which
    is all the sources read.
    """

    def __init__(self, subsystems: tuple[str, ...] = SUBSYSTEMS) -> None:
        self._subsystems = subsystems
        self._monitor: Any = None
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1

    def start(self, on_event: EventCallback) -> None:
        try:
            import pyudev

            context = pyudev.Context()
            monitor = pyudev.Monitor.from_netlink(context, source="kernel")
            for subsystem in self._subsystems:
                monitor.filter_by(subsystem)
            monitor.start()
        except Exception as e:  # ImportError (no libudev), OSError (no netlink) ...
            raise MonitorUnavailable(f"{type(e).__name__}: {e}") from None
        self._monitor = monitor
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, args=(on_event,), name="nfd-udev", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join(timeout=2)
            self._thread = None
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)

    def _run(self, on_event: EventCallback) -> None:
        fd = self._monitor.fileno()
        while True:
            ready, _, _ = select.select([fd, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            while True:
                try:
                    device = self._monitor.poll(timeout=0)
                except Exception as e:
                    if isinstance(e, OSError) and e.errno == errno.ENOBUFS:
                        # The socket overflowed in an event storm: some events are lost,
                        # so look at everything again.
                        on_event("uevents lost (receive buffer overrun)")
                        continue
                    log.warning("hot-plug events stopped (%s); devices show at the next interval", e)
                    return
                if device is None:
                    break
                # libudev does not filter kernel-sourced events by subsystem itself.
                if device.subsystem in self._subsystems and device.action in ACTIONS:
                    on_event(f"{device.subsystem} {device.action} {device.sys_name}")


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
