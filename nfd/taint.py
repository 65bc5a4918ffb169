"""A Node taint as rules write it, decisions carry it and the master patches it.

A module of its own, so that what imports the policy's checks (``nfd discover`` among
them) does not create this class too.
"""

from __future__ import annotations

from dataclasses import dataclass


# Not printed: str() shows a taint (see docs/architecture.md, "Plain Python").
@dataclass(frozen=True, slots=True, repr=False)
class Taint:
    """A Node taint as a rule writes it (the key is never prefixed)."""

    key: str
    value: str = ""
    effect: str = ""

    def __str__(self) -> str:
        # As kubectl prints taints; also the master's tracking annotation.
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
