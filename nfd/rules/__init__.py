"""NodeFeatureRule engine: parse upstream's rule objects and evaluate them against one
node's raw features. Pure: no I/O, no Kubernetes.

This module is the engine's public surface; the master, ``nfd rules test`` and the
``custom`` source use only what is here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nfd.features import Features
from nfd.rules.evaluate import FEATURE_NS, FeatureView, RuleTrace, execute, merge_names
from nfd.rules.expressions import EvalError
from nfd.rules.model import Rule, RuleParseError, parse_rule
from nfd.taint import Taint


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
    policy qualifies and filters them afterwards). Values may still be dynamic
    (``@domain.feature.element``): the policy resolves them against the node's features
    and ``matched``."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    extended_resources: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    vars: dict[str, str] = field(default_factory=dict)
    errors: list[RuleError] = field(default_factory=list)
    # The ``rule.matched`` feature after the last rule (labels and vars of every rule
    # that matched), for dynamic values that refer to it.
    matched: dict[str, str] = field(default_factory=dict)
    # Qualified label name -> the NodeFeatureRule object that set it last.
    label_origins: dict[str, str] = field(default_factory=dict)
    # Per rule: matched or not and why (only when evaluate(..., explain=True)).
    traces: list[RuleTrace] = field(default_factory=list)


@dataclass(frozen=True)
class RuleSet:
    """One NodeFeatureRule object (``metadata.name`` and its parsed ``spec.rules``)."""

    name: str
    rules: tuple[Rule, ...] = ()


API_GROUP = "nfd.k8s-sigs.io"
KIND = "NodeFeatureRule"


def load_rulesets(docs: Iterable[Any]) -> tuple[list[RuleSet], list[RuleError]]:
    """Parse NodeFeatureRule objects (dicts as from YAML or the API server). Objects of
    other kinds are skipped; an invalid rule is reported and the object's other rules
    are kept. The result is sorted by object name, as upstream processes them."""
    # By name: an object given twice is replaced by the later one, as ``kubectl apply``
    # of the documents in order would leave it.
    by_name: dict[str, tuple[RuleSet, list[RuleError]]] = {}
    errors: list[RuleError] = []
    for index, doc in enumerate(_flatten(docs)):
        if not isinstance(doc, Mapping):
            if doc is not None:
                errors.append(RuleError(f"document {index + 1}", "", "not a mapping"))
            continue
        if doc.get("kind") != KIND or not str(doc.get("apiVersion", "")).startswith(API_GROUP + "/"):
            continue
        meta = doc.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            errors.append(RuleError(f"document {index + 1}", "", "metadata.name is required"))
            continue
        spec = doc.get("spec")
        raw_rules = spec.get("rules") if isinstance(spec, Mapping) else None
        if raw_rules is None:
            raw_rules = []
        if not isinstance(raw_rules, list):
            # The API server would refuse it: an earlier object of that name stays.
            errors.append(RuleError(name, "", "spec.rules: expected a list"))
            continue
        rules: list[Rule] = []
        own: list[RuleError] = []
        for i, raw in enumerate(raw_rules):
            try:
                rules.append(parse_rule(raw, f"spec.rules[{i}]"))
            except RuleParseError as e:
                rname = raw.get("name") if isinstance(raw, Mapping) else None
                own.append(RuleError(name, rname if isinstance(rname, str) else f"#{i}", str(e)))
        replaced = by_name.get(name)
        if replaced is not None:  # its problems went with it
            errors = [e for e in errors if not any(e is r for r in replaced[1])]
        by_name[name] = (RuleSet(name=name, rules=tuple(rules)), own)
        errors.extend(own)
    return [by_name[n][0] for n in sorted(by_name)], errors


def _flatten(docs: Iterable[Any]) -> Iterator[Any]:
    # ``kubectl get nfr -o yaml`` gives a List with items.
    for d in docs:
        if (
            isinstance(d, Mapping)
            and str(d.get("kind", "")).endswith("List")
            and isinstance(d.get("items"), list)
        ):
            yield from d["items"]
        else:
            yield d


def evaluate(rulesets: Sequence[RuleSet], features: Features, *, explain: bool = False) -> RuleOutput:
    """Run the rules in order against one node's features. Never raises for a bad rule:
    it is reported in ``errors`` and the other rules still apply."""
    out = RuleOutput()
    view = FeatureView(features)
    for rs in rulesets:
        for rule in rs.rules:
            try:
                res = execute(rule, view, explain=explain)
            except Exception as e:  # EvalError; anything else is a bug of ours, which
                # must not cost the node its other rules either
                reason = str(e) if isinstance(e, EvalError) else f"internal error: {type(e).__name__}: {e}"
                out.errors.append(RuleError(rs.name, rule.name, reason))
                if explain:
                    out.traces.append(RuleTrace(rs.name, rule.name, False, reason, failed=True))
                continue
            if explain:
                out.traces.append(RuleTrace(rs.name, rule.name, res.matched, res.reason))
            # Upstream feeds every evaluated rule's output back, matched or not, so
            # ``rule.matched`` exists (empty) once any rule has been evaluated without
            # an error: a later bare ``rule.matched`` term then matches.
            view.ensure_matched()
            if not res.matched:
                continue
            out.taints.extend(rule.taints)
            merge_names(out.labels, res.labels)
            for k in res.labels:
                out.label_origins[k if "/" in k else f"{FEATURE_NS}/{k}"] = rs.name
            merge_names(out.extended_resources, rule.extended_resources)
            merge_names(out.annotations, rule.annotations)
            out.vars.update(res.vars)
            view.add_matched(res.labels)
            view.add_matched(res.vars)
    out.matched = dict(view.matched or {})
    return out


def lint_rulesets(rulesets: Sequence[RuleSet]) -> list[RuleError]:
    """Problems that fail a rule whenever evaluation reaches them (see ``nfd.rules.lint``):
    for reporting; ``evaluate`` is not affected."""
    from nfd.rules.lint import rule_problems

    return [
        RuleError(rs.name, rule.name, p) for rs in rulesets for rule in rs.rules for p in rule_problems(rule)
    ]


__all__ = [
    "RuleError",
    "RuleOutput",
    "RuleSet",
    "RuleTrace",
    "Taint",
    "evaluate",
    "lint_rulesets",
    "load_rulesets",
]
