"""The client-side write rate: a token bucket whose rate adapts (AIMD).

It starts at the ceiling (``--kube-api-qps``), so a cold start of a large cluster is
not held back by the client; the API server's own flow control (API Priority and
Fairness) decides how much it takes. When it pushes back, the rate follows:

- a 429 halves the rate (not below ``min_qps``) and pauses every caller until its
  Retry-After has passed;
- a slow answer (over ``slow_s``) cuts the rate by a quarter, at most once a second:
  rising latency is the API server's first sign of overload;
- every second without either gives back ``increase_qps`` of rate, up to the ceiling.
"""

from __future__ import annotations

import asyncio
import time


class AdaptiveRate:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        min_qps: float = 5.0,
        increase_qps: float = 25.0,
        slow_s: float = 2.0,
        max_pause_s: float = 30.0,
    ) -> None:
        self.max_qps = qps
        self.min_qps = min(min_qps, qps)
        self.qps = qps
        self.burst = burst
        self.increase_qps = increase_qps
        self.slow_s = slow_s
        self.max_pause_s = max_pause_s
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._last_change = self._stamp  # last decrease or increase of the rate
        self._paused_until = 0.0
        self._lock = asyncio.Lock()
        self.decreases = 0  # how often the API server pushed back (tests, logs)

    async def acquire(self) -> None:
        # The lock keeps waiters in order, so one burst of callers cannot starve others.
        async with self._lock:
            while True:
                t = time.monotonic()
                if t < self._paused_until:
                    await asyncio.sleep(self._paused_until - t)
                    continue
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

    def _decrease(self, factor: float) -> None:
        t = time.monotonic()
        self.qps = max(self.min_qps, self.qps * factor)
        self._tokens = min(self._tokens, 1.0)  # no burst right after a push-back
        self._last_change = t
        self.decreases += 1

    def throttled(self, retry_after: float | None) -> None:
        """The API server answered 429."""
        self._decrease(0.5)
        if retry_after:
            until = time.monotonic() + min(retry_after, self.max_pause_s)
            self._paused_until = max(self._paused_until, until)

    def answered(self, seconds: float) -> None:
        """A call took ``seconds``."""
        if seconds > self.slow_s and time.monotonic() - self._last_change >= 1.0:
            self._decrease(0.75)
