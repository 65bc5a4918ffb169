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
from nfd.policy import Policy, publish
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
        pub = publish(
            labels=raw,
            annotations=out.annotations,
            extended_resources=out.extended_resources,
            taints=[(t.key, t.value, t.effect) for t in out.taints],
            features=features,
            matched=out.matched,
            policy=self.policy,
        )
        rejected = {k: dict(v) for k, v in pub.rejected.items()}
        if out.taints and not self.policy.enable_taints:
            rejected.setdefault("taints", {}).update(
                {taint_str(t): "taints are disabled (enable with --enable-taints)" for t in out.taints}
            )
        served = set(device_plugin_resources)
        ers = dict(pub.extended_resources)
        for name in sorted(served & ers.keys()):
            del ers[name]
            rejected.setdefault("extendedResources", {})[name] = (
                "served by a device plugin on this node; left to kubelet"
            )
        errors = [f"source {n}: {e}" for n, e in sorted(source_errors.items())]
        errors += [str(e) for e in out.errors]
        return Decision(
            labels=pub.labels,
            annotations=pub.annotations,
            extended_resources=ers,
            taints=tuple(Taint(k, v, e) for k, v, e in pub.taints),
            rejected={k: v for k, v in rejected.items() if v},
            rule_errors=tuple(errors),
        )
