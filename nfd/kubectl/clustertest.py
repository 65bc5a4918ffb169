"""Rules tried on the live cluster, writing nothing: for each node, its current features
(from the master's read API) evaluated twice with the one ``nfd.decision.decide``, once
with the cluster's NodeFeatureRules and once with the file's objects applied over them
(same name: replaced, as ``kubectl apply`` would), and the two results compared.

The node's other inputs are what the master holds: its built-in labels (those with
origin ``worker``), what its NodeFeature objects ask for, the resources device plugins
serve. Both sides share them, so what differs is the rules' doing alone; rules the
master reads from its own ``--rules-dir`` are on neither side.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from nfd.decision import KINDS, Decision, decide
from nfd.features import Features
from nfd.master.decisions.decide import ALL, recorded
from nfd.policy import Policy
from nfd.rules import RuleSet, evaluate, load_rulesets


@dataclass
class NodeDiff:
    """What applying the rules would do to one node. Per kind (``decision.KINDS``):
    name -> value (added, removed), name -> [old, new] (changed), name -> reason
    (rejected: refused with the new rules)."""

    node: str
    added: dict[str, dict[str, str]] = field(default_factory=dict)
    changed: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    removed: dict[str, dict[str, str]] = field(default_factory=dict)
    rejected: dict[str, dict[str, str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed or self.rejected or self.errors)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "rejected": self.rejected,
            "errors": self.errors,
        }


def overlay(cluster: Iterable[Mapping[str, Any]], proposed: Iterable[Any]) -> list[Any]:
    """The cluster's NodeFeatureRule objects with ``proposed`` applied over them by name."""
    names = {
        str((d.get("metadata") or {}).get("name"))
        for d in proposed
        if isinstance(d, Mapping) and isinstance(d.get("metadata"), Mapping)
    }
    kept = [d for d in cluster if str((d.get("metadata") or {}).get("name")) not in names]
    return [*kept, *proposed]


def rulesets(docs: Iterable[Any]) -> list[RuleSet]:
    sets, _errors = load_rulesets(docs)  # a broken file's errors are reported by the caller
    return sorted(sets, key=lambda rs: rs.name)


def _items(d: Decision) -> dict[str, dict[str, str]]:
    return {
        "labels": d.labels,
        "annotations": d.annotations,
        "extendedResources": d.extended_resources,
        "taints": {str(t): t.effect for t in d.taints},
    }


def compare(node: str, before: Decision, after: Decision) -> NodeDiff:
    out = NodeDiff(node)
    old, new = _items(before), _items(after)
    for kind in KINDS:
        a, b = old[kind], new[kind]
        if added := {k: v for k, v in b.items() if k not in a}:
            out.added[kind] = added
        if removed := {k: v for k, v in a.items() if k not in b}:
            out.removed[kind] = removed
        if changed := {k: [a[k], b[k]] for k in a.keys() & b.keys() if a[k] != b[k]}:
            out.changed[kind] = dict(sorted(changed.items()))
        if rejected := after.rejected.get(kind):
            out.rejected[kind] = rejected
    out.errors = [e for e in after.rule_errors if e not in before.rule_errors]
    return out


class GroupCache:
    """Feature groups by content hash, parsed once however many nodes and pages share them."""

    def __init__(self) -> None:
        self._parsed: dict[str, Any] = {}

    def add(self, groups: Mapping[str, Any]) -> None:
        for h, g in groups.items():
            self._parsed.setdefault(h, g)

    def features(self, item: Mapping[str, Any]) -> Features:
        raw: dict[str, dict[str, Any]] = {"flags": {}, "attributes": {}, "instances": {}}
        for key, h in (item.get("groups") or {}).items():
            kind, _, name = key.partition("/")
            raw[kind][name] = self._parsed[h]
        return Features.from_dict(raw)


def inputs(item: Mapping[str, Any], label_sets: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """(built-in labels, what NodeFeature objects ask for) of a features page's item."""
    return dict(label_sets.get(str(item.get("builtinLabels"))) or {}), dict(item.get("nodeLabels") or {})


class Differ:
    """Diffs nodes, sharing the work between nodes whose diffs must be equal.

    As the master shares decisions: a decision is a pure function of the feature groups
    it reads (recorded, not declared) and of the node's other inputs, so a node that
    agrees with an earlier one on every group read so far, and on those inputs, gets
    that node's diff. A fleet of a few hardware kinds costs a few evaluations."""

    def __init__(self, before: Sequence[RuleSet], after: Sequence[RuleSet], policy: Policy) -> None:
        self.before, self.after, self.policy = before, after, policy
        self.groups = GroupCache()
        self._reads: set[str] = set()
        self._cache: dict[tuple[Any, ...], NodeDiff] = {}
        self.evaluated = 0

    def _key(self, item: Mapping[str, Any], inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        every = ALL in self._reads
        groups = item.get("groups") or {}
        seen = tuple(sorted((k, h) for k, h in groups.items() if every or k.partition("/")[2] in self._reads))
        return (seen, *inputs)

    def diff(self, item: Mapping[str, Any], label_sets: Mapping[str, Any]) -> NodeDiff:
        builtin, node_labels = inputs(item, label_sets)
        dpr = tuple(item.get("devicePluginResources") or ())
        others = (tuple(sorted(builtin.items())), tuple(sorted(node_labels.items())), dpr)
        node = str(item.get("node"))
        hit = self._cache.get(self._key(item, others))
        if hit is not None:
            return replace(hit, node=node)
        reads: set[str] = set()
        features = recorded(self.groups.features(item), reads)

        def decision(rules: Sequence[RuleSet]) -> Decision:
            return decide(
                labels=builtin,
                features=features,
                rules=evaluate(rules, features),
                node_labels=node_labels,
                policy=self.policy,
                device_plugin_resources=dpr,
            )

        out = compare(node, decision(self.before), decision(self.after))
        self.evaluated += 1
        self._reads |= reads
        self._cache[self._key(item, others)] = out
        return out


def diff_pages(
    pages: Iterable[Mapping[str, Any]],
    before: Sequence[RuleSet],
    after: Sequence[RuleSet],
    policy: Policy,
    wanted: set[str] | None = None,
) -> Iterator[NodeDiff]:
    """Each node's diff, page by page of ``GET /api/v1/features`` (only ``wanted``
    nodes, when given)."""
    differ = Differ(before, after, policy)
    for page in pages:
        differ.groups.add(page.get("groups") or {})
        label_sets = page.get("labelSets") or {}
        for item in page.get("items") or []:
            if wanted is None or item.get("node") in wanted:
                yield differ.diff(item, label_sets)


def to_json(diffs: Iterable[NodeDiff]) -> str:
    return json.dumps({"nodes": [d.to_dict() for d in diffs]}, indent=2)
