"""Static checks of parsed rules: problems that make a rule fail whenever upstream's
master gets to evaluate that part of it (an unknown operator, a bad regular expression,
a template that does not parse ...).

Evaluation reports these only when it reaches them, exactly as upstream does; a node
under test may never reach them. ``nfd rules test`` prints these checks as warnings so
that a rule is seen to be broken before it meets the node that trips over it.
"""

from __future__ import annotations

from collections.abc import Iterator

from nfd.rules.expressions import bounds_ordered, parse_int, parse_version
from nfd.rules.model import OPS, VALUE_TYPES, Expr, Rule, Term

_NO_VALUES = frozenset({"", "Exists", "DoesNotExist", "IsTrue", "IsFalse"})
_SOME_VALUES = frozenset({"In", "NotIn", "InRegexp"})
_ONE_VALUE = frozenset({"Gt", "Ge", "Lt", "Le"})
_TWO_VALUES = frozenset({"GtLt", "GeLe"})


def expr_problem(e: Expr) -> str | None:
    if e.op not in OPS:
        return f"invalid Op {e.op!r}"
    n = len(e.values)
    if e.op in _NO_VALUES and n:
        return f"'value' must be empty for Op {e.op!r}"
    if e.op in _SOME_VALUES and not n:
        return f"'value' must be non-empty for Op {e.op!r}"
    if e.op == "InRegexp" and e.regexes is None:
        return f"'value' must only contain valid regexps (have {list(e.values)})"
    if e.op in _ONE_VALUE and n != 1:
        return f"'value' must contain exactly one element for Op {e.op!r}"
    if e.op in _TWO_VALUES and n != 2:
        return f"'value' must contain exactly two elements for Op {e.op!r}"
    if e.type not in VALUE_TYPES:
        return f"unknown value type {e.type!r} (supported: version)"
    if e.op in _ONE_VALUE | _TWO_VALUES:
        try:
            nums = [_number(v, e.type) for v in e.values]
        except ValueError:
            kind = "a version" if e.type == "version" else "an integer"
            return f"every value of Op {e.op!r} must be {kind} (have {list(e.values)})"
        if e.op in _TWO_VALUES and not bounds_ordered(e.op, nums[0], nums[1]):
            return f"value[0] must be less than value[1] for Op {e.op!r} (have {list(e.values)})"
    return None


def _number(v: str, typ: str) -> tuple[int, ...]:
    if typ == "version":
        return parse_version(v)
    return (parse_int(v),)


def _terms(rule: Rule) -> Iterator[tuple[str, Term]]:
    for i, t in enumerate(rule.match_features):
        yield f"matchFeatures[{i}]", t
    for j, alt in enumerate(rule.match_any):
        for i, t in enumerate(alt):
            yield f"matchAny[{j}].matchFeatures[{i}]", t


def rule_problems(rule: Rule) -> list[str]:
    out: list[str] = list(rule.ignored)
    for where, term in _terms(rule):
        if "." not in term.feature:
            out.append(f"{where}: feature name {term.feature!r} is not <domain>.<feature>: it never matches")
        for key, e in term.expressions or ():
            p = expr_problem(e)
            if p:
                out.append(f"{where}.matchExpressions.{key}: {p}")
        if term.name is not None:
            p = expr_problem(term.name)
            if p:
                out.append(f"{where}.matchName: {p}")
    for field, tmpl in (("labelsTemplate", rule.labels_template), ("varsTemplate", rule.vars_template)):
        if tmpl is not None and tmpl.parse_error:
            out.append(f"{field}: invalid template: {tmpl.parse_error}")
    for i, t in enumerate(rule.taints):
        if t.effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append(f"taints[{i}]: effect {t.effect!r} is not NoSchedule, PreferNoSchedule or NoExecute")
    return out
