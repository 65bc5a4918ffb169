"""Exponential backoff, the one every process uses when something it needs is away.

Each place keeps its own numbers (``initial``, ``factor``, ``cap``); what they share is
how a delay grows, how it is reset and how a Retry-After is honoured. Jitter is for a
fleet: when a master restarts, every worker of the cluster finds it gone at the same
moment, and without jitter they would all come back at the same moment too. A place
where one process retries alone (a watch, a registration with its own kubelet) may keep
exact steps with ``jitter=0``.

Only the standard library: every process imports this, the worker among them, whose
import cost is kept small.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# A Retry-After beyond this is taken as a mistake rather than waited out.
MAX_RETRY_AFTER = 600.0


@dataclass
class Backoff:
    initial: float = 1.0
    cap: float = 60.0
    factor: float = 2.0
    # The wait is drawn from the top ``jitter`` fraction of its step: 0.5 draws from the
    # step's upper half, so it never collapses to zero; 0 is the step itself.
    jitter: float = 0.5
    max_retry_after: float = MAX_RETRY_AFTER
    rng: random.Random = field(default_factory=random.Random)
    clock: Callable[[], float] = time.monotonic
    failures: int = 0
    # When the next try is due, for a caller that polls (:meth:`fail`, :meth:`due`).
    retry_at: float = 0.0

    def next_delay(self, retry_after: float | None = None, *, cap: float | None = None) -> float:
        """Seconds to wait after one more failure.

        The step grows ``initial * factor**n`` up to ``cap`` (this call's ``cap`` when
        that is lower: a caller may keep some failures on short steps without losing
        the count). A Retry-After the other side sent is a floor: we never come back
        earlier than it asked, up to ``max_retry_after``.
        """
        step = self.initial * self.factor ** min(self.failures, 64)
        ceiling = min(step, self.cap, self.cap if cap is None else cap)
        self.failures += 1
        delay = self.rng.uniform(ceiling * (1 - self.jitter), ceiling) if self.jitter else ceiling
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay

    def fail(self, retry_after: float | None = None) -> float:
        """One more failure for a caller that polls :meth:`due`: the delay, from now."""
        delay = self.next_delay(retry_after)
        self.retry_at = self.clock() + delay
        return delay

    def due(self) -> bool:
        """Whether the wait after the last failure is over (always, after a success)."""
        return self.clock() >= self.retry_at

    def reset(self) -> None:
        """A success: the next failure starts from ``initial`` again."""
        self.failures = 0
        self.retry_at = 0.0
