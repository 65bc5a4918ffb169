"""The custom feature source: upstream's worker-side rules.

Rules come from ``sources.custom`` of the worker config (upstream's rule format,
``matchFeatures``/``matchAny``), after upstream's two built-in rules
(``rdma.capable``: a Mellanox PCI device, vendor ``15b3``; ``rdma.available``: kernel
modules ``ib_uverbs`` and ``rdma_ucm`` loaded).

The source discovers nothing itself: its rules look at the features of the other
sources. ``labels()`` receives the whole node's features (every source's), so the rules
are evaluated there, as upstream's custom source evaluates against all sources'
features. Only labels come out (upstream's custom rules have no annotations, extended
resources or taints); names are kept as the rules wrote them, so unprefixed names end
up in ``feature.node.kubernetes.io/``. A rule that is invalid or fails is logged and
skipped; the other rules still apply.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nfd.config import SourcesConfig
from nfd.features import Features, Labels
from nfd.hostroot import HostRoot

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

log = logging.getLogger(__name__)

BUILTIN_RULES: tuple[Mapping[str, Any], ...] = (
    {
        "name": "RDMA capable static rule",
        "labels": {"rdma.capable": "true"},
        "matchFeatures": [
            {"feature": "pci.device", "matchExpressions": {"vendor": {"op": "In", "value": ["15b3"]}}}
        ],
    },
    {
        "name": "RDMA available static rule",
        "labels": {"rdma.available": "true"},
        "matchFeatures": [
            {
                "feature": "kernel.loadedmodule",
                "matchExpressions": {"ib_uverbs": {"op": "Exists"}, "rdma_ucm": {"op": "Exists"}},
            }
        ],
    },
)


def custom_rule_labels(
    rules: Sequence[Mapping[str, Any]],
    features: Features,
    *,
    builtin: Sequence[Mapping[str, Any]] = BUILTIN_RULES,
) -> Labels:
    """Evaluate worker-side rules (after ``builtin``) against the node's features; labels
    out, dynamic ``@domain.feature.element`` values resolved."""
    from collections.abc import Mapping

    from nfd.policy import dynamic_value
    from nfd.rules import RuleSet, evaluate
    from nfd.rules.model import Rule, RuleParseError, parse_rule

    parsed: list[Rule] = [parse_rule(raw, "built-in") for raw in builtin]
    for i, raw in enumerate(rules):
        if isinstance(raw, Mapping) and any(str(k).lower() == "matchon" for k in raw):
            log.warning("custom rule %r: the legacy matchOn format is not supported", raw.get("name"))
            continue
        try:
            parsed.append(parse_rule(raw, f"sources.custom[{i}]"))
        except RuleParseError as e:
            log.warning("custom rule ignored: %s", e)
    out = evaluate([RuleSet("sources.custom", tuple(parsed))], features)
    for err in out.errors:
        log.warning("custom rule failed: %s", err)
    labels: Labels = {}
    for name, value in out.labels.items():
        if value.startswith("@"):
            try:
                value = dynamic_value(value, features, out.matched)
            except ValueError as e:
                log.warning("custom label %s left out: %s", name, e)
                continue
        labels[name] = value
    return labels


class CustomSource:
    name = "custom"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        return Features()

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        if not config.custom:
            # The default configuration: only the two built-in rules, checked directly so
            # that discovery does not load the rules engine (tests hold the two paths
            # equal).
            return builtin_labels(features)
        return custom_rule_labels(config.custom, features)


def builtin_labels(features: Features) -> Labels:
    """BUILTIN_RULES without the engine: a PCI device of vendor 15b3; modules ib_uverbs
    and rdma_ucm both loaded."""
    out: Labels = {}
    if any(dev.get("vendor") == "15b3" for dev in features.instances.get("pci.device", ())):
        out["rdma.capable"] = "true"
    if {"ib_uverbs", "rdma_ucm"} <= features.flags.get("kernel.loadedmodule", set()):
        out["rdma.available"] = "true"
    return out
