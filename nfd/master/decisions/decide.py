"""Features -> what the master publishes for a node: the built-in labels from the same
label functions ``nfd discover`` uses, rule outputs from the rules engine, and the one
``nfd.decision.decide`` over both. The decider also records which feature groups its
decisions read, so that the service can share decisions between nodes."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from nfd.config import WorkerConfig
from nfd.decision import Decision, decide
from nfd.features import Features
from nfd.labels import source_labels
from nfd.policy import Policy
from nfd.rules import RuleError, RuleOutput, RuleSet, evaluate
from nfd.sources import FeatureSource

log = logging.getLogger(__name__)


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


def recorded(features: Features, reads: set[str]) -> Features:
    """``features`` whose group maps note in ``reads`` each group looked at (``ALL``
    for a read of every group): what a decision made from them depends on."""
    return Features(
        flags=_Recording(features.flags, reads),
        attributes=_Recording(features.attributes, reads),
        instances=_Recording(features.instances, reads),
    )


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
        try:
            return self._decide(recorded(features, reads), device_plugin_resources, node_labels)
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
        raw, source_errors = source_labels(self.sources, features, self.config)
        return decide(
            labels=raw,
            features=features,
            rules=self._rule_output(features) if self.rulesets else None,
            policy=self.policy,
            node_labels=node_labels,
            device_plugin_resources=device_plugin_resources,
            errors=[f"source {n}: {e}" for n, e in sorted(source_errors.items())],
        )
