"""Turn a burst of events into one call.

Plugging in a USB hub or a multi-function PCI card raises a dozen udev events within a
few milliseconds; one discovery pass after the burst settles is what we want.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Debouncer:
    """Calls ``action(reason)`` once ``delay`` seconds have passed without a new event.

    One thread, started lazily on the first event and kept; ``close`` stops it.
    """

    def __init__(self, delay: float, action: Callable[[str], None]) -> None:
        self.delay = delay
        self._action = action
        self._cond = threading.Condition()
        self._due: float | None = None  # monotonic time the action fires
        self._reason = ""
        self._closed = False
        self._thread: threading.Thread | None = None

    def event(self, reason: str) -> None:
        with self._cond:
            if self._closed:
                return
            self._due = time.monotonic() + self.delay
            self._reason = reason
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="nfd-debounce", daemon=True)
                self._thread.start()
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (self._due is None or self._due > time.monotonic()):
                    timeout = None if self._due is None else self._due - time.monotonic()
                    self._cond.wait(timeout)
                if self._closed:
                    return
                reason, self._due = self._reason, None
            try:
                self._action(reason)
            except Exception:  # the next burst must still get through
                log.exception("debounced action failed")
