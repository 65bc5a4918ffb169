"""The node agents' one listener for the kernel's device uevents (pyudev).

The source is the kernel's own netlink group, not udevd's: it needs no udevd on the host
and no /run/udev in the pod, and a device's sysfs entry exists when its uevent is sent,
which is all that the worker's sources and the device health checks read. libudev does
not filter kernel-sourced events by subsystem, so the listener does.

A burst of uevents (a hub of devices, a driver bound to many functions) can overflow the
socket's receive buffer; the kernel then drops events and the next read fails with
ENOBUFS. What was lost is unknown, so the listener answers with ``on_overrun``: the
caller looks at everything again (the worker runs a pass, the health monitor re-checks
every device).
"""

from __future__ import annotations

import errno
import logging
import os
import select
from collections.abc import Callable, Iterable
from typing import Any

from nfd.loopthread import LoopThread

log = logging.getLogger(__name__)

SOURCE = "kernel"

# (subsystem, action, the device's sysfs name), for each uevent of a watched subsystem.
UeventCallback = Callable[[str, str, str], None]


class UeventsUnavailable(Exception):
    """uevents cannot be had here (no libudev, no netlink in this pod ...)."""


def pyudev_monitor() -> Any:
    """A started pyudev monitor on the kernel's uevents."""
    import pyudev

    monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source=SOURCE)
    monitor.start()
    return monitor


class UeventListener:
    def __init__(
        self,
        subsystems: Iterable[str],
        *,
        on_event: UeventCallback,
        on_overrun: Callable[[], None],
        name: str = "nfd-uevents",
        open_monitor: Callable[[], Any] = pyudev_monitor,
    ) -> None:
        self.subsystems = frozenset(subsystems)
        self.on_event = on_event
        self.on_overrun = on_overrun
        self.name = name
        self._open_monitor = open_monitor
        self._monitor: Any = None
        self._loop: LoopThread | None = None
        self._wake_r = self._wake_w = -1
        self.overruns = 0

    def start(self) -> None:
        """Listen from now on; raises :class:`UeventsUnavailable` when this host cannot."""
        try:
            self._monitor = self._open_monitor()
        except Exception as e:  # ImportError (no libudev), OSError (no netlink) ...
            raise UeventsUnavailable(f"{type(e).__name__}: {e}") from None
        self._wake_r, self._wake_w = os.pipe()
        self._loop = LoopThread(self.name, self._round, interval=0.0, on_stop=self._unblock, logger=log)
        self._loop.start()

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        loop.stop()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._wake_r = self._wake_w = -1

    def _unblock(self) -> None:
        os.write(self._wake_w, b"x")

    def _round(self) -> None:
        """Wait for uevents and hand each on; returns when the listener stops."""
        assert self._loop is not None
        fd = self._monitor.fileno()
        ready, _, _ = select.select([fd, self._wake_r], [], [])
        if self._wake_r in ready:
            return
        while True:
            try:
                device = self._monitor.poll(timeout=0)
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    log.warning("%s: uevents stopped (%s); changes show at the next interval", self.name, e)
                    self._loop.end()
                    return
                self.overruns += 1
                log.info("%s: uevents lost (receive buffer overrun); looking at everything again", self.name)
                self.on_overrun()
                continue
            if device is None:
                return
            if device.subsystem in self.subsystems:
                self.on_event(device.subsystem, device.action, device.sys_name)
