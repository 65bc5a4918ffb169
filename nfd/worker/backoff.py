"""Exponential backoff with jitter for a master that is away or busy.

Jitter matters here: when a master restarts, every worker of the cluster finds it gone
at the same moment, and without jitter they would all come back at the same moment too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# A Retry-After beyond this is taken as a mistake rather than waited out.
MAX_RETRY_AFTER = 600.0


@dataclass
class Backoff:
    initial: float = 1.0
    cap: float = 60.0
    # While nothing takes the connection (the master restarting, not Ready yet), a try
    # costs the master nothing, and the first one after it is back should come soon:
    # the delay grows to this at most (to ``cap`` when that is lower).
    down_cap: float = 2.0
    factor: float = 2.0
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0

    def next_delay(self, retry_after: float | None = None, *, down: bool = False) -> float:
        """Seconds to wait after one more failure (``down``: the master took no connection).

        The delay grows ``initial * factor**n`` up to ``cap`` (``down_cap`` when down);
        the wait is drawn from its upper half, so it never collapses to zero. A
        Retry-After the master sent is a floor: we never come back earlier than it asked.
        """
        cap = min(self.cap, self.down_cap) if down else self.cap
        ceiling = min(cap, self.initial * self.factor ** min(self.failures, 64))
        self.failures += 1
        delay = self.rng.uniform(ceiling / 2, ceiling)
        if retry_after is not None:
            delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
        return delay

    def reset(self) -> None:
        self.failures = 0
