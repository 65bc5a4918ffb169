"""What one node carries: labels, annotations, extended resources and taints, and what
was refused and why. One pure function, :func:`decide`, makes it; the master, ``nfd
rules test`` and ``nfd discover`` all call it, so what a user sees locally is what the
cluster gets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nfd.features import Features
from nfd.policy import (
    DEFAULT_POLICY,
    Policy,
    check_annotation,
    check_extended_resource,
    check_label,
    check_taint,
    dynamic_value,
    qualified_labels,
    qualify,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from nfd.rules import RuleOutput
    from nfd.taint import Taint

# The kinds of ``Decision.rejected``, as the master's API names them.
KINDS = ("labels", "annotations", "extendedResources", "taints")
TAINTS_DISABLED = "taints are disabled (enable with --enable-taints)"
SERVED_BY_DEVICE_PLUGIN = "served by a device plugin or DRA on this node; left to kubelet"


# No slots: the master interns decisions in a WeakValueDictionary and caches derived
# encodings in their __dict__. Not printed (see docs/architecture.md, "Plain Python").
@dataclass(frozen=True, repr=False)
class Decision:
    """What one node should carry, names qualified. Rejected items never reach the API
    server."""

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    extended_resources: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    # kind (one of KINDS) -> name -> reason; kinds with nothing refused are left out
    rejected: dict[str, dict[str, str]] = field(default_factory=dict)
    # failing sources ("source cpu: ...") and rules ("object/rule: reason")
    rule_errors: tuple[str, ...] = ()
    # Published label -> where it came from: "worker" (the built-in labels), "NodeFeature"
    # (a NodeFeature object's spec.labels) or "NodeFeatureRule <name>". Free of node
    # names, so nodes of one kind share decisions.
    origins: dict[str, str] = field(default_factory=dict)


def decide(
    *,
    labels: Mapping[str, str],
    features: Features,
    rules: RuleOutput | None = None,
    node_labels: Mapping[str, str] | None = None,
    policy: Policy = DEFAULT_POLICY,
    device_plugin_resources: Iterable[str] = (),
    errors: Iterable[str] = (),
) -> Decision:
    """The master's filtering, in upstream's order. ``labels``: the built-in labels
    (named as sources name them); ``node_labels``: what NodeFeature objects ask for
    (upstream's order: the built-in labels, then these, then the rules' labels);
    ``rules``: what the rules set. Unprefixed label, annotation and extended-resource names get
    ``feature.node.kubernetes.io/``; dynamic values (``@domain.feature.element``) of
    labels and extended resources are resolved; then each item is checked against
    ``policy``. Taints are kept only with ``policy.enable_taints`` and are otherwise
    reported as rejected. Extended resources a device plugin serves on the node are left
    to kubelet. ``errors`` (a failing source, say) are passed through."""
    raw: dict[str, str] = {}
    origin: dict[str, str] = {}
    layers: list[tuple[Mapping[str, str], Callable[[str], str]]] = [
        (labels, lambda _: "worker"),
        (node_labels or {}, lambda _: "NodeFeature"),
    ]
    annotations: Mapping[str, str] = {}
    resources: Mapping[str, str] = {}
    taints: Iterable[Taint] = ()
    matched: Mapping[str, str] | None = None
    all_errors = list(errors)
    if rules is not None:
        by_rule = rules.label_origins
        layers.append((rules.labels, lambda name: f"NodeFeatureRule {by_rule.get(name, '')}".rstrip()))
        annotations, resources, taints, matched = (
            rules.annotations,
            rules.extended_resources,
            rules.taints,
            rules.matched,
        )
        all_errors += [str(e) for e in rules.errors]
    for items, source in layers:  # later layers win; within one, the prefixed spelling
        for name, value in qualified_labels(items).items():
            raw[name], origin[name] = value, source(name)
    rejected: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}

    def resolve(value: str) -> str:
        return dynamic_value(value, features, matched) if value.startswith("@") else value

    def keep(value: str) -> str:
        return value

    kinds: tuple[tuple[Mapping[str, str], Callable[[str, str], str | None], Callable[[str], str], str], ...] = (
        (raw, lambda n, v: check_label(n, v, policy), resolve, "labels"),
        (annotations, lambda n, v: check_annotation(n, v, policy), keep, "annotations"),
        (resources, lambda n, v: check_extended_resource(n, v, policy), resolve, "extendedResources"),
    )  # fmt: skip
    accepted: dict[str, dict[str, str]] = {}
    for items, check, value_of, kind in kinds:
        out = accepted[kind] = {}
        for name_as_written in sorted(items, key=qualify):
            name = qualify(name_as_written)
            if name_as_written != name and name in items:
                continue  # the prefixed spelling wins
            try:
                value = value_of(items[name_as_written])
            except ValueError as e:
                rejected[kind][name] = str(e)
                continue
            err = check(name, value)
            if err:
                rejected[kind][name] = err
            else:
                out[name] = value

    kept: list[Taint] = []
    for t in taints:
        err = check_taint(t.key, t.value, t.effect, policy)
        if err:
            rejected["taints"][str(t)] = err
        elif t not in kept:
            kept.append(t)

    ers = accepted["extendedResources"]
    for name in sorted(set(device_plugin_resources) & ers.keys()):
        del ers[name]
        rejected["extendedResources"][name] = SERVED_BY_DEVICE_PLUGIN
    # Sorted by the published (qualified) name, so output does not depend on spelling.
    return Decision(
        labels=dict(sorted(accepted["labels"].items())),
        annotations=dict(sorted(accepted["annotations"].items())),
        extended_resources=dict(sorted(ers.items())),
        taints=tuple(kept),
        rejected={k: v for k, v in rejected.items() if v},
        rule_errors=tuple(all_errors),
        origins={name: origin[name] for name in accepted["labels"]},
    )
