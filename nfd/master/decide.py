"""Features -> what the master publishes for a node. Pure: the built-in labels come from
the same label functions ``nfd discover`` uses, rule outputs from the rules engine, and
everything passes through the same namespace policy (nfd.policy.publish)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nfd.config import WorkerConfig
from nfd.features import Features
from nfd.labels import source_labels
from nfd.policy import Policy, publish, qualify
from nfd.rules import RuleError, RuleOutput, RuleSet, Taint, evaluate
from nfd.sources import FeatureSource

log = logging.getLogger(__name__)


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
    # Published label -> where it came from: "worker", "NodeFeature" (which object is
    # the node's: NodeRecord.label_objects) or "NodeFeatureRule <name>". Free of node
    # names, so nodes of one kind share decisions.
    origins: dict[str, str] = field(default_factory=dict)


def taint_str(t: Taint) -> str:
    """Upstream's rendering (``key=value:effect``), also used in the tracking annotation."""
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


ALL = "\x00all"  # stands for a read of every group (iteration, len, comparison)


class _Recording(dict[str, Any]):
    """A feature-group map that notes which groups are looked at."""

    def __init__(self, data: Mapping[str, Any], reads: set[str]) -> None:
        super().__init__(data)
        self._reads = reads

    def get(self, key: str, default: Any = None) -> Any:
        self._reads.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._reads.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._reads.add(str(key))
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self._reads.add(ALL)
        return super().__iter__()

    def __len__(self) -> int:
        self._reads.add(ALL)
        return super().__len__()

    def keys(self) -> Any:
        self._reads.add(ALL)
        return super().keys()

    def values(self) -> Any:
        self._reads.add(ALL)
        return super().values()

    def items(self) -> Any:
        self._reads.add(ALL)
        return super().items()

    def copy(self) -> dict[str, Any]:
        self._reads.add(ALL)
        return dict(super().items())

    def __eq__(self, other: object) -> bool:
        self._reads.add(ALL)
        return super().__eq__(other)

    __hash__ = None


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
        # The feature groups label functions, rules and the policy have read so far.
        self._reads: set[str] = set()
        self._reads_all = False

    def with_rules(self, rulesets: Sequence[RuleSet]) -> Decider:
        return Decider(sources=self.sources, config=self.config, policy=self.policy, rulesets=rulesets)

    def relevant(self, group: str) -> bool:
        """Whether feature group ``group`` (``kernel.version``) was read by any decision
        so far.

        A decision is a pure function of what it reads: two nodes that agree on every
        group the first node's decision read get the same decision. So decisions are
        cached under the groups read so far, and nodes that differ only elsewhere (the
        node name in ``system.name``, say) share one. Reads are recorded, not declared:
        a new source or rule cannot make this unsound."""
        return self._reads_all or group in self._reads

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

    def decide(
        self,
        features: Features,
        device_plugin_resources: Iterable[str] = (),
        node_labels: Mapping[str, str] = {},
    ) -> Decision:
        """``node_labels``: qualified name -> value that the node's NodeFeature objects
        ask for; they override the built-in labels and rule labels override them."""
        reads: set[str] = set()
        recorded = Features(
            flags=_Recording(features.flags, reads),
            attributes=_Recording(features.attributes, reads),
            instances=_Recording(features.instances, reads),
        )
        try:
            return self._decide(recorded, device_plugin_resources, node_labels)
        finally:
            if ALL in reads:
                self._reads_all = True
            self._reads |= reads

    def _decide(
        self,
        features: Features,
        device_plugin_resources: Iterable[str],
        node_labels: Mapping[str, str],
    ) -> Decision:
        built_in, source_errors = source_labels(self.sources, features, self.config)
        out = self._rule_output(features)
        # Upstream's order: the worker's labels, then NodeFeature objects', then rules'.
        raw = {qualify(k): v for k, v in built_in.items()}
        origin = dict.fromkeys(raw, "worker")
        for k, v in node_labels.items():
            raw[k], origin[k] = v, "NodeFeature"
        for k, v in out.labels.items():
            q = qualify(k)
            raw[q], origin[q] = v, f"NodeFeatureRule {out.label_origins.get(q, '')}".rstrip()
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
            origins={k: origin.get(k, "") for k in pub.labels},
        )
