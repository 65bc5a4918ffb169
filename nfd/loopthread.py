"""A loop on its own daemon thread, supervised: the node agents' one way to run one.

Each agent has loops that must outlive whatever one round hits (a broken device kind, an
API server away, a bug): the round's exception is logged, the loop waits a backoff and
goes on. Stopping is prompt (the wait is cut short, and ``on_stop`` unblocks a round
that waits on something else: a pipe, a call to kubelet) and leaves no thread behind
(the thread is joined).

Only the standard library and :mod:`nfd.backoff`: the worker imports this.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from nfd.backoff import Backoff

log = logging.getLogger(__name__)


def _backoff() -> Backoff:
    # A round that failed on this node alone, not a fleet at a server: exact steps.
    return Backoff(initial=1.0, cap=30.0, jitter=0)


@dataclass(eq=False)
class LoopThread:
    """Runs ``step`` on a thread named ``name`` until :meth:`stop`.

    ``step`` returns the seconds until the next round (None: ``interval``); :meth:`wake`
    runs the next round at once. A round that raises is logged on ``logger`` and the
    next one comes after ``backoff``'s delay, which a wake does not cut short; a round
    that returns resets the backoff.
    """

    name: str
    step: Callable[[], float | None]
    interval: float
    backoff: Backoff = field(default_factory=_backoff)
    # Called by stop() before the join: unblocks a round that waits on something else.
    on_stop: Callable[[], None] | None = None
    join_timeout: float = 5.0
    logger: logging.Logger = log
    # Failures whose message says it all, in a line (an API server's answer): logged as
    # they are; any other exception is named with its type, as a bug should be.
    expected: tuple[type[Exception], ...] = ()
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _wake: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def sleep(self, seconds: float) -> bool:
        """Wait inside a round; True when stopping (then at once)."""
        return self._stop.wait(seconds)

    def end(self) -> None:
        """From a round: no further rounds (the thread ends when this one returns)."""
        self._stop.set()

    def stop(self) -> None:
        """End the loop and wait for its thread. Safe to call twice, and from a round."""
        self._stop.set()
        self._wake.set()
        if self.on_stop is not None:
            self.on_stop()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.join_timeout)
            if thread.is_alive():
                self.logger.warning("%s: still running %.0f s after stop", self.name, self.join_timeout)

    def join(self, timeout: float | None = None) -> None:
        """Wait for a loop that ends by itself (:meth:`end`)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # a wake from now on runs another round after this one
            try:
                delay = self.step()
            except Exception as e:  # the loop must outlive whatever one round hits
                wait = self.backoff.next_delay()
                if isinstance(e, self.expected):
                    self.logger.error("%s; retry in %.1f s", e, wait)
                else:
                    self.logger.error("%s: %s: %s; retry in %.1f s", self.name, type(e).__name__, e, wait)
                    self.logger.debug("%s: the round's traceback", self.name, exc_info=True)
                self._stop.wait(wait)
                continue
            self.backoff.reset()
            self._wake.wait(self.interval if delay is None else max(0.0, delay))
