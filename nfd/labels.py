"""Features + config -> labels. Pure: the worker, the master and ``nfd discover`` all
come here, so a node gets the same labels whoever computes them."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from nfd.config import WorkerConfig
from nfd.decision import Decision, decide
from nfd.features import Features, Labels
from nfd.policy import DEFAULT_POLICY, Policy

if TYPE_CHECKING:
    from collections.abc import Iterable

    from nfd.sources import FeatureSource

log = logging.getLogger(__name__)

# Sources whose label names are used as they are, without "<source>-" in front.
_UNMANGLED = frozenset({"local", "custom"})


def source_labels(
    sources: Iterable[FeatureSource], features: Features, config: WorkerConfig
) -> tuple[Labels, dict[str, str]]:
    """Each source's labels, named as upstream's worker names them (``cpu-cpuid.AVX``,
    ``vendor.io/x`` kept), filtered by ``core.labelWhiteList``. A source whose label
    function fails is reported and skipped: it never drops the other sources' labels."""
    whitelist = None
    if config.core.label_whitelist:
        whitelist = re.compile(config.core.label_whitelist)
    out: Labels = {}
    errors: dict[str, str] = {}
    for src in sources:
        try:
            raw = src.labels(features, config.sources)
        except Exception as e:  # a buggy labeler must not cost the node its other labels
            log.warning("labels of source %s failed: %s", src.name, e)
            errors[src.name] = f"{type(e).__name__}: {e}"
            continue
        for name, value in raw.items():
            if src.name not in _UNMANGLED and "/" not in name:
                name = f"{src.name}-{name}"
            base = name.split("/", 1)[-1]
            if whitelist is not None and not whitelist.search(base):
                continue
            out[name] = value
    return out, errors


def node_labels(
    sources: Iterable[FeatureSource],
    features: Features,
    config: WorkerConfig,
    policy: Policy = DEFAULT_POLICY,
) -> Decision:
    """The decision for a node without rules: the sources' labels, qualified and passed
    through ``policy``; a failing source is in ``rule_errors``."""
    raw, errors = source_labels(sources, features, config)
    return decide(
        labels=raw,
        features=features,
        policy=policy,
        errors=[f"source {n}: {e}" for n, e in sorted(errors.items())],
    )
