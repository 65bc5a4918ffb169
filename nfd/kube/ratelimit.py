"""The client's pace towards the API server (AIMD): how many requests a second (a
token bucket) and how many at once (a window of requests in flight), both adapting to
how the API server answers.

The rate starts at its ceiling (``--kube-api-qps``), so a cold start of a large
cluster is not held back by the client; the API server's own flow control (API
Priority and Fairness) decides how much it takes. When it pushes back, the rate follows:

- a 429 halves the rate (not below ``min_qps``; the 429s of requests already on the
  wire count once: at most one decrease a second), and the refused request waits its
  Retry-After before it is tried again (the work queue's retry);
- a slow answer (over ``slow_s``) cuts the rate by a quarter, at most once a second:
  rising latency is the API server's first sign of overload;
- every second without either gives back ``increase_qps`` of rate, up to the ceiling.

The window of writes in flight (up to ``max_in_flight``, ``--parallelism``) finds
the server's pace: a fixed number caps the master at that many round trips at a time
(10 at ~100 ms each: 100 nodes/s however much more the server would take), and a large
fixed number overloads a small server. It starts at its ceiling, as the rate does: a
window that starts small leaves a busy server's CPUs idle while it grows (3-4% idle
over a cold start of 1,000 Nodes on a real server, docs/perf.md). It shrinks when the
answers slow down and on push-back, and grows back while the window is full and the
writes are answered fast, one more per window's worth of answers (a window started
lower, ``initial_in_flight``, doubles each window until the first push-back):

- a 429 halves it, a slow answer (over ``slow_s``) cuts it by a quarter (with the rate);
- rising latency cuts it by a quarter, at most once a second: the recent write latency
  (a moving average of the last few) above ``tolerance`` times the usual one (of the
  last fifty or so) and above ``fast_s`` (under which any answer is fast: a few
  milliseconds' noise is no sign of a queue), and so is the latency per write in flight,
  the inverse of the throughput (averaged over about the last window of answers, and
  over the last ten windows). On a small API server each request in flight adds to
  every answer's time while the throughput still grows or holds (etcd commits writes
  together): latency alone, over the fastest seen or over the usual, would hold the
  window far below what the server takes (on a shared real server it did: 11 writes in
  flight on average, half a bare client's pace). A queue building up elsewhere (API
  Priority and Fairness holding requests, other clients) slows each answer without more
  in flight, and shows as a jump of both. Only writes
  are timed for it: reads are served from the API server's cache and a LIST's time
  grows with its size, so either would make the writes look slow.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

SHORT_ALPHA = 0.2  # weight of a write's latency in the recent average (~ the last 5)
LONG_ALPHA = 0.02  # ... and in the usual one (~ the last 50)


class AdaptiveRate:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        max_in_flight: int = 64,
        initial_in_flight: int | None = None,
        min_qps: float = 5.0,
        increase_qps: float = 25.0,
        slow_s: float = 2.0,
        fast_s: float = 0.05,
        tolerance: float = 2.0,
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
        # -- the window --
        self.max_in_flight = max_in_flight
        self.limit = float(
            max_in_flight if initial_in_flight is None else min(initial_in_flight, max_in_flight)
        )
        self.in_flight = 0
        self.peak_limit = self.limit
        self.fast_s = fast_s
        self.tolerance = tolerance
        self._slow_start = True
        # Moving averages of write latencies: the last few, and the usual of late; and
        # of latencies per write in flight (the inverse of the throughput), alike.
        self._recent: float | None = None
        self._usual: float | None = None
        self._recent_per: float = 0.0
        self._usual_per: float = 0.0
        self._last_cut = -math.inf
        self._freed = asyncio.Event()
        self.window_cuts = 0  # how often the window shrank

    @property
    def window(self) -> int:
        """Requests that may be in flight now."""
        return max(1, int(self.limit))

    async def acquire(self, *, write: bool = False) -> None:
        """Wait for a token; a write also for a place in the window (``release()`` it
        when answered). Reads (reviews of workers' tokens, LISTs) take no place: they
        must not wait behind node writes."""
        # The lock keeps waiters in order, so one burst of callers cannot starve others.
        async with self._lock:
            while write and self.in_flight >= self.window:
                self._freed.clear()
                await self._freed.wait()
            while True:
                t = self._clock()
                self._recover(t)
                self._tokens = min(self.burst, self._tokens + (t - self._stamp) * self.qps)
                self._stamp = t
                if self._tokens >= 1:
                    self._tokens -= 1
                    break
                await asyncio.sleep((1 - self._tokens) / self.qps)
            if write:
                self.in_flight += 1

    def release(self) -> None:
        """A write acquired with ``write=True`` was answered."""
        self.in_flight -= 1
        self._freed.set()

    def _recover(self, t: float) -> None:
        if self.qps < self.max_qps and t - self._last_change >= 1.0:
            self.qps = min(self.max_qps, self.qps + self.increase_qps * (t - self._last_change))
            self._last_change = t

    def _decrease(self, factor: float, why: str) -> None:
        t = self._clock()
        if self.decreases and t - self._last_decrease < 1.0:
            return
        before, window = self.qps, self.window
        self.qps = max(self.min_qps, self.qps * factor)
        self._tokens = min(self._tokens, 1.0)  # no burst right after a push-back
        self._last_change = self._last_decrease = t
        self.decreases += 1
        self._cut(factor, t)
        log.info(
            "API server %s: write rate %.0f/s -> %.0f/s, in flight %d -> %d",
            why, before, self.qps, window, self.window,
        )  # fmt: skip

    def _cut(self, factor: float, t: float) -> None:
        self.limit = max(1.0, self.limit * factor)
        self._slow_start = False
        self._last_cut = t
        self.window_cuts += 1

    def throttled(self) -> None:
        """The API server answered 429."""
        self._decrease(0.5, "asks to slow down (429)")

    def answered(self, seconds: float, *, write: bool = False) -> None:
        """A call took ``seconds``; ``write``: a write, whose latency steers the window.
        Call it before ``release()``: whether the window was full counts."""
        if seconds > self.slow_s:
            self._decrease(0.75, f"answers slowly ({seconds:.1f}s)")
            return
        if write:
            self._steer(seconds)

    def _steer(self, seconds: float) -> None:
        t = self._clock()
        per = seconds / max(1, self.in_flight)
        if self._recent is None or self._usual is None:
            self._recent = self._usual = seconds
            self._recent_per = self._usual_per = per
        else:
            self._recent += SHORT_ALPHA * (seconds - self._recent)
            self._usual += LONG_ALPHA * (seconds - self._usual)
            # The throughput over about the last window of answers, and the last ten:
            # one answer of 64 in flight says little about the server's pace.
            n = max(1, self.in_flight)
            self._recent_per += min(SHORT_ALPHA, 1 / n) * (per - self._recent_per)
            self._usual_per += min(LONG_ALPHA, 0.1 / n) * (per - self._usual_per)
        recent, usual = self._recent, self._usual
        if (
            recent > self.fast_s
            and recent > self.tolerance * usual
            and self._recent_per > self.tolerance * self._usual_per
        ):
            if t - self._last_cut >= 1.0:
                window = self.window
                self._cut(0.75, t)
                log.info(
                    "API server answers slower (%.0f ms, usually %.0f ms): in flight %d -> %d",
                    recent * 1000, usual * 1000, window, self.window,
                )  # fmt: skip
            return
        # Grow only while the window is used: an idle client learns nothing of the server.
        if self.in_flight >= self.window and self.limit < self.max_in_flight:
            self.limit = min(self.max_in_flight, self.limit + (1.0 if self._slow_start else 1.0 / self.limit))
            self.peak_limit = max(self.peak_limit, self.limit)
