"""The client-side write rate: a token bucket whose rate adapts (AIMD).

It starts at the ceiling (``--kube-api-qps``), so a cold start of a large cluster is
not held back by the client; the API server's own flow control (API Priority and
Fairness) decides how much it takes. When it pushes back, the rate follows:

- a 429 halves the rate (not below ``min_qps``; the 429s of requests already on the
  wire count once: at most one decrease a second), and the refused request waits its
  Retry-After before it is tried again (the work queue's retry);
- a slow answer (over ``slow_s``) cuts the rate by a quarter, at most once a second:
  rising latency is the API server's first sign of overload;
- every second without either gives back ``increase_qps`` of rate, up to the ceiling.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class AdaptiveRate:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        min_qps: float = 5.0,
        increase_qps: float = 25.0,
        slow_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self.max_qps = qps
        self.min_qps = min(min_qps, qps)
        self.qps = qps
        self.burst = burst
        self.increase_qps = increase_qps
        self.slow_s = slow_s
        self._tokens = float(burst)
        self._stamp = clock()
        self._last_change = self._stamp  # last decrease or increase of the rate
        self._last_decrease = self._stamp
        self._lock = asyncio.Lock()
        self.decreases = 0  # how often the API server pushed back

    async def acquire(self) -> None:
        # The lock keeps waiters in order, so one burst of callers cannot starve others.
        async with self._lock:
            while True:
                t = self._clock()
                self._recover(t)
                self._tokens = min(self.burst, self._tokens + (t - self._stamp) * self.qps)
                self._stamp = t
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self.qps)

    def _recover(self, t: float) -> None:
        if self.qps < self.max_qps and t - self._last_change >= 1.0:
            self.qps = min(self.max_qps, self.qps + self.increase_qps * (t - self._last_change))
            self._last_change = t

    def _decrease(self, factor: float, why: str) -> None:
        t = self._clock()
        if self.decreases and t - self._last_decrease < 1.0:
            return
        before = self.qps
        self.qps = max(self.min_qps, self.qps * factor)
        self._tokens = min(self._tokens, 1.0)  # no burst right after a push-back
        self._last_change = self._last_decrease = t
        self.decreases += 1
        log.info("API server %s: write rate %.0f/s -> %.0f/s", why, before, self.qps)

    def throttled(self) -> None:
        """The API server answered 429."""
        self._decrease(0.5, "asks to slow down (429)")

    def answered(self, seconds: float) -> None:
        """A call took ``seconds``."""
        if seconds > self.slow_s:
            self._decrease(0.75, f"answers slowly ({seconds:.1f}s)")
