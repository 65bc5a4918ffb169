"""Running rules against one node's features, as upstream v0.19's master does.

- Objects in order of name, rules in order; a rule that fails (an expression or
  template that cannot be evaluated) is reported and skipped, and later rules go on.
- ``matchAny`` (OR) is evaluated first, then ``matchFeatures`` (AND); a rule with
  neither always matches. Each matched ``matchAny`` element runs the templates with its
  own matched elements; without templates the first match is enough.
- The labels and vars of each matched rule become attributes of the feature
  ``rule.matched`` for the rules after it (names as the rule wrote them). The feature
  exists, empty, as soon as one rule has been evaluated without an error, matched or
  not.
- Templates run first; static ``labels``/``vars`` override what they produced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nfd.features import Features
from nfd.rules.expressions import Element, EvalError, Miss, match_multi, match_names
from nfd.rules.model import Rule, Term
from nfd.rules.template import Template, TemplateError

BACKREF = "rule.matched"
FEATURE_NS = "feature.node.kubernetes.io"


@dataclass
class RuleTrace:
    """What happened to one rule (for ``--explain``)."""

    object: str
    rule: str
    matched: bool
    reason: str = ""  # why not, when it did not match or failed
    failed: bool = False


@dataclass
class Outcome:
    matched: bool
    labels: dict[str, str] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    reason: str = ""


class FeatureView:
    """The node's features plus the ``rule.matched`` attributes built up so far, without
    copying the node's features."""

    __slots__ = ("features", "matched")

    def __init__(self, features: Features) -> None:
        self.features = features
        existing = features.attributes.get(BACKREF)
        self.matched: dict[str, str] | None = dict(existing) if existing is not None else None

    def lookup(
        self, name: str
    ) -> tuple[set[str] | None, Mapping[str, str] | None, Sequence[Mapping[str, str]] | None]:
        f = self.features
        attrs = self.matched if name == BACKREF else f.attributes.get(name)
        return f.flags.get(name), attrs, f.instances.get(name)

    def ensure_matched(self) -> None:
        if self.matched is None:
            self.matched = {}

    def add_matched(self, values: Mapping[str, str]) -> None:
        if self.matched is None:
            self.matched = {}
        self.matched.update(values)


MatchedFeatures = dict[str, dict[str, list[Element]]]


def _match_terms(
    terms: Sequence[Term], view: FeatureView, why: list[Miss] | None
) -> tuple[bool, MatchedFeatures]:
    """Upstream's evaluateFeatureMatcher with fail-fast: every term must match."""
    matched: MatchedFeatures = {}
    term_ok = True
    for term in terms:
        fname = term.lookup_name
        dom, nam = term.template_key
        bucket = matched.setdefault(dom, {})
        flags, attrs, instances = view.lookup(fname)
        if flags is None and attrs is None and instances is None:
            if why is not None:
                why.append(Miss(f"feature {term.feature!r} is not present on this node"))
            return False, matched
        elems: list[Element] = []
        local_why: list[Miss] | None = [] if why is not None else None
        if term.expressions is not None:
            term_ok, elems = match_multi(term.expressions, flags, attrs, instances, local_why)
        if term_ok and term.name is not None:
            term_ok, more = match_names(term.name, flags, attrs, instances)
            elems = elems + more
            if not term_ok and local_why is not None:
                local_why.append(Miss(f"no element name matched matchName {term.name.describe()}"))
        bucket.setdefault(nam, []).extend(elems)
        if not term_ok:
            if why is not None:
                detail = local_why[0].text if local_why else "did not match"
                why.append(Miss(f"{term.feature}: {detail}"))
            return False, matched
    return True, matched


def _expand(tmpl: Template | None, data: MatchedFeatures, out: dict[str, str]) -> None:
    if tmpl is None:
        return
    try:
        out.update(tmpl.expand_map(data))
    except TemplateError as e:
        raise EvalError(str(e)) from None


def execute(rule: Rule, view: FeatureView, *, explain: bool = False) -> Outcome:
    """One rule; raises EvalError when it cannot be evaluated."""
    labels: dict[str, str] = {}
    vars_: dict[str, str] = {}
    why: list[Miss] | None = [] if explain else None
    if rule.match_any:
        any_ok = False
        templates = rule.labels_template is not None or rule.vars_template is not None
        for i, terms in enumerate(rule.match_any):
            sub_why: list[Miss] | None = [] if explain else None
            ok, mf = _match_terms(terms, view, sub_why)
            if ok:
                any_ok = True
                if not templates:
                    break
                _expand(rule.labels_template, mf, labels)
                _expand(rule.vars_template, mf, vars_)
            elif why is not None and sub_why:
                why.append(Miss(f"matchAny[{i}]: {sub_why[0].text}"))
        if not any_ok:
            reason = ""
            if why is not None:
                reason = f"none of the {len(rule.match_any)} matchAny alternatives matched"
                if why:
                    reason += " (" + "; ".join(m.text for m in why) + ")"
            return Outcome(False, reason=reason)
    if rule.match_features:
        ok, mf = _match_terms(rule.match_features, view, why)
        if not ok:
            return Outcome(False, reason=why[-1].text if why else "")
        _expand(rule.labels_template, mf, labels)
        _expand(rule.vars_template, mf, vars_)
    labels.update(rule.labels)
    vars_.update(rule.vars)
    return Outcome(True, labels, vars_)


def merge_names(acc: dict[str, str], new: Mapping[str, str], ns: str = FEATURE_NS) -> None:
    """Merge one rule's names into the running result the way upstream's master does:
    unprefixed names stand for ``<ns>/name``; within one rule the prefixed spelling wins,
    across rules the later rule wins (whichever spelling it used)."""
    prefix = ns + "/"
    for k, v in new.items():
        if "/" not in k:
            if prefix + k in new:
                continue
            acc.pop(prefix + k, None)
        elif k.startswith(prefix):
            acc.pop(k[len(prefix) :], None)
        acc[k] = v
