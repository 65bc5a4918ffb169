"""One discovery pass: every selected source, each isolated from the others."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nfd.config import SourcesConfig
from nfd.features import Features
from nfd.hostroot import HostRoot

if TYPE_CHECKING:
    from collections.abc import Iterable

    from nfd.sources import FeatureSource

log = logging.getLogger(__name__)


# Not compared, not printed (see docs/architecture.md, "Plain Python").
@dataclass(slots=True, eq=False, repr=False)
class DiscoveryResult:
    """One discovery pass: the sources' features, and each source's error (if it failed)
    and time."""

    features: Features = field(default_factory=Features)
    errors: dict[str, str] = field(default_factory=dict)  # source -> what went wrong
    durations: dict[str, float] = field(default_factory=dict)  # source -> seconds


def discover(sources: Iterable[FeatureSource], host: HostRoot, config: SourcesConfig) -> DiscoveryResult:
    """Run each source's discover(); a source that fails is logged and reported, and the
    other sources' features are kept."""
    result = DiscoveryResult()
    for src in sources:
        t0 = time.perf_counter()
        try:
            result.features.update(src.discover(host, config))
        except Exception as e:  # one broken source must not cost the node the rest
            log.warning("feature source %s failed: %s: %s", src.name, type(e).__name__, e)
            result.errors[src.name] = f"{type(e).__name__}: {e}"
        finally:
            result.durations[src.name] = time.perf_counter() - t0
    return result
