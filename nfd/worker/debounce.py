"""Turn a burst of events into one call.

Plugging in a USB hub or a multi-function PCI card raises a dozen udev events within a
few milliseconds; one discovery pass after the burst settles is what we want.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from nfd.loopthread import LoopThread

log = logging.getLogger(__name__)

IDLE_S = 3600.0


class Debouncer:
    """Calls ``action(reason)`` once ``delay`` seconds have passed without a new event.

    One loop thread, started lazily on the first event and kept; ``close`` stops it.
    """

    def __init__(self, delay: float, action: Callable[[str], None]) -> None:
        self.delay = delay
        self._action = action
        self._lock = threading.Lock()
        self._due: float | None = None  # monotonic time the action fires
        self._reason = ""
        self._closed = False
        # Between bursts nothing is due: the loop sleeps until the next event wakes it.
        self._loop = LoopThread("nfd-debounce", self._round, interval=IDLE_S, join_timeout=2, logger=log)
        self._started = False

    def event(self, reason: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._due = time.monotonic() + self.delay
            self._reason = reason
            start, self._started = not self._started, True
        if start:
            self._loop.start()
        self._loop.wake()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._loop.stop()

    def _round(self) -> float | None:
        """The action when the burst has settled; else how long until it may have."""
        with self._lock:
            if self._due is None:
                return None
            left = self._due - time.monotonic()
            if left > 0:
                return left
            reason, self._due = self._reason, None
        self._action(reason)  # raising: logged, and the next burst still gets through
        return None
