"""A client-side token bucket (upstream's client-go limiter: qps with a burst)."""

from __future__ import annotations

import asyncio
import time


class TokenBucket:
    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        # The lock keeps waiters in order, so one burst of callers cannot starve others.
        async with self._lock:
            while True:
                t = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (t - self._stamp) * self.qps)
                self._stamp = t
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self.qps)
