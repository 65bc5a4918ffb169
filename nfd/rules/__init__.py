"""NodeFeatureRule engine: parse upstream's rule objects and evaluate them against one
node's raw features. Pure: no I/O, no Kubernetes.

This module is the engine's public surface; the master, ``nfd rules test`` and the
``custom`` source use only what is here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nfd.features import Features


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class RuleError:
    """An invalid or failing rule: named by its object and rule, with the reason."""

    object: str
    rule: str
    reason: str

    def __str__(self) -> str:
        return f"{self.object}/{self.rule}: {self.reason}"


@dataclass
class RuleOutput:
    """What the rules set for one node, names as the rules wrote them (the master's
    policy qualifies and filters them afterwards)."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    extended_resources: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    vars: dict[str, str] = field(default_factory=dict)
    errors: list[RuleError] = field(default_factory=list)


@dataclass(frozen=True)
class RuleSet:
    """One NodeFeatureRule object (``metadata.name`` and its parsed ``spec.rules``)."""

    name: str
    rules: tuple[Any, ...] = ()


def load_rulesets(docs: Iterable[Any]) -> tuple[list[RuleSet], list[RuleError]]:
    """Parse NodeFeatureRule objects (dicts as from YAML or the API server). Objects of
    other kinds are skipped; an invalid rule is reported and the object's other rules
    are kept. The result is sorted by object name, as upstream processes them."""
    raise NotImplementedError


def evaluate(rulesets: Sequence[RuleSet], features: Features) -> RuleOutput:
    """Run the rules in order against one node's features."""
    raise NotImplementedError
