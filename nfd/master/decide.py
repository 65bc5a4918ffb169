"""Features -> what the master publishes for a node. Pure: the built-in labels come from
the same label functions ``nfd discover`` uses, rule outputs from the rules engine, and
everything passes through the same namespace policy."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from nfd.config import WorkerConfig
from nfd.features import Features
from nfd.labels import source_labels
from nfd.policy import (
    Policy,
    check_annotation,
    check_extended_resource,
    check_taint,
    filter_labels,
    qualify,
)
from nfd.rules import RuleError, RuleOutput, RuleSet, Taint, evaluate
from nfd.sources import FeatureSource

log = logging.getLogger(__name__)

KINDS = ("labels", "annotations", "extendedResources", "taints")


@dataclass(frozen=True)
class Decision:
    """What one node should carry. Rejected items never reach the API server."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    extended_resources: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # kind ("labels", "annotations", "extendedResources", "taints") -> name -> reason
    rejected: dict[str, dict[str, str]] = field(default_factory=dict)
    rule_errors: tuple[str, ...] = ()


def taint_str(t: Taint) -> str:
    """Upstream's rendering (``key=value:effect``), also used in the tracking annotation."""
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


class Decider:
    """Holds the central configuration (label sources, policy, rules) and turns one
    node's features into a Decision."""

    def __init__(
        self,
        *,
        sources: Iterable[FeatureSource],
        config: WorkerConfig,
        policy: Policy,
        rulesets: Sequence[RuleSet] = (),
    ) -> None:
        self.sources = list(sources)
        self.config = config
        self.policy = policy
        self.rulesets: tuple[RuleSet, ...] = tuple(rulesets)

    def with_rules(self, rulesets: Sequence[RuleSet]) -> Decider:
        return Decider(sources=self.sources, config=self.config, policy=self.policy, rulesets=rulesets)

    def _rule_output(self, features: Features) -> RuleOutput:
        if not self.rulesets:
            return RuleOutput()
        try:
            return evaluate(self.rulesets, features)
        except NotImplementedError:
            return RuleOutput(errors=[RuleError("*", "*", "the rules engine is not available")])
        except Exception as e:  # a broken rule set must not cost the node its built-in labels
            log.warning("rule evaluation failed: %s: %s", type(e).__name__, e)
            return RuleOutput(errors=[RuleError("*", "*", f"{type(e).__name__}: {e}")])

    def decide(self, features: Features, device_plugin_resources: Iterable[str] = ()) -> Decision:
        raw, source_errors = source_labels(self.sources, features, self.config)
        out = self._rule_output(features)
        raw.update(out.labels)  # rules come after the built-in labels, as upstream
        labels, rejected_labels = filter_labels(raw, self.policy)

        annotations: dict[str, str] = {}
        rejected_ann: dict[str, str] = {}
        for name, value in sorted(out.annotations.items()):
            q = qualify(name)
            err = check_annotation(q, value, self.policy)
            if err:
                rejected_ann[q] = err
            else:
                annotations[q] = value

        served = set(device_plugin_resources)
        ers: dict[str, str] = {}
        rejected_er: dict[str, str] = {}
        for name, value in sorted(out.extended_resources.items()):
            q = qualify(name)
            err = check_extended_resource(q, value, self.policy)
            if err is None and q in served:
                err = "served by a device plugin on this node; left to kubelet"
            if err:
                rejected_er[q] = err
            else:
                ers[q] = value

        taints: list[Taint] = []
        rejected_taints: dict[str, str] = {}
        seen: set[tuple[str, str]] = set()
        for t in out.taints:
            err = check_taint(t.key, t.value, t.effect, self.policy)
            if err:
                rejected_taints[taint_str(t)] = err
            elif (t.key, t.effect) not in seen:
                seen.add((t.key, t.effect))
                taints.append(t)

        rejected = {
            k: v
            for k, v in zip(KINDS, (rejected_labels, rejected_ann, rejected_er, rejected_taints), strict=True)
            if v
        }
        errors = [f"source {n}: {e}" for n, e in sorted(source_errors.items())]
        errors += [str(e) for e in out.errors]
        return Decision(
            labels=labels,
            annotations=annotations,
            extended_resources=ers,
            taints=tuple(taints),
            rejected=rejected,
            rule_errors=tuple(errors),
        )
