"""A stand-in for pyudev's monitor, for the uevent listener's tests and its users':
a pipe that wakes select, and a queue of what poll() returns or raises."""

from __future__ import annotations

import errno
import os
import queue
from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    subsystem: str
    action: str
    sys_name: str


class FakeMonitor:
    """What poll() hands out, in order: a Device, or an exception to raise."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        self._items: queue.Queue[Device | Exception] = queue.Queue()

    def fileno(self) -> int:
        return self._r

    def push(self, *items: Device | Exception) -> None:
        for item in items:
            self._items.put(item)
        os.write(self._w, b"x")

    def poll(self, timeout: float = 0) -> Device | None:
        # The pipe first: a byte written after this read stands for an item queued
        # after it, which the next select then finds.
        try:
            os.read(self._r, 4096)
        except BlockingIOError:
            pass
        try:
            item = self._items.get_nowait()
        except queue.Empty:
            return None
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        os.close(self._r)
        os.close(self._w)


def overrun() -> OSError:
    """What pyudev raises when the socket's receive buffer overflowed."""
    return OSError(errno.ENOBUFS, os.strerror(errno.ENOBUFS))
