"""The parsed form of NodeFeatureRule objects (``nfd.k8s-sigs.io/v1alpha1``).

Parsing is forgiving where the API server is: unknown keys are dropped (the CRD's
structural schema prunes them), ``null`` lists and maps are empty. A value of the wrong
shape makes that one rule invalid; the object's other rules are kept.

Problems that upstream only notices when an expression or template is evaluated (an
unknown operator, a bad regular expression, a template that does not parse) are kept on
the parsed object and raised at the same point of evaluation, so a rule behaves exactly
as it would in upstream's master: it fails only when that part is reached.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from nfd.rules.template import Template
from nfd.taint import Taint

OPS = frozenset(
    {"", "In", "NotIn", "InRegexp", "Exists", "DoesNotExist", "Gt", "Ge", "Lt", "Le", "GtLt", "GeLe"}
    | {"IsTrue", "IsFalse"}
)
VALUE_TYPES = frozenset({"", "version"})


class RuleParseError(ValueError):
    """A rule (or object) whose shape cannot be used; the message says where."""


@dataclass(frozen=True)
class Expr:
    """One MatchExpression: operator, values and optional value type."""

    op: str
    values: tuple[str, ...] = ()
    type: str = ""
    # Precompiled regular expressions for InRegexp (None when one does not compile:
    # upstream reports that when the expression is evaluated).
    regexes: tuple[re.Pattern[str], ...] | None = None

    def describe(self) -> str:
        vals = f" {list(self.values)}" if self.values else ""
        typ = f" (type {self.type})" if self.type else ""
        return f"{self.op or '<any>'}{vals}{typ}"


@dataclass(frozen=True)
class Term:
    """One entry of matchFeatures: a feature and the expressions on it."""

    feature: str
    expressions: tuple[tuple[str, Expr], ...] | None = None  # None: not given
    name: Expr | None = None  # matchName

    # Upstream looks the feature up lower-cased but keys template data by the name as
    # written ("<domain>.<feature>"; without a dot: the lower-cased name and "").
    @cached_property
    def lookup_name(self) -> str:
        return self.feature.lower()

    @cached_property
    def template_key(self) -> tuple[str, str]:
        dom, dot, nam = self.feature.partition(".")
        return (dom, nam) if dot else (self.feature.lower(), "")


@dataclass(frozen=True)
class Rule:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    labels_template: Template | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    vars: Mapping[str, str] = field(default_factory=dict)
    vars_template: Template | None = None
    taints: tuple[Taint, ...] = ()
    extended_resources: Mapping[str, str] = field(default_factory=dict)
    match_features: tuple[Term, ...] = ()
    match_any: tuple[tuple[Term, ...], ...] = ()
    # Keys the API server's schema would prune ("where: key"): dropped, reported by lint.
    ignored: tuple[str, ...] = ()


# -- parsing --------------------------------------------------------------------------


_RULE_KEYS = frozenset(
    {"name", "labels", "labelsTemplate", "annotations", "vars", "varsTemplate", "taints", "extendedResources"}
    | {"matchFeatures", "matchAny"}
)
_TERM_KEYS = frozenset({"feature", "matchExpressions", "matchName"})
_EXPR_KEYS = frozenset({"op", "value", "type"})
_TAINT_KEYS = frozenset({"key", "value", "effect", "timeAdded"})
_MATCH_ANY_KEYS = frozenset({"matchFeatures"})


def _unknown(v: Mapping[str, Any], allowed: frozenset[str], where: str, notes: list[str]) -> None:
    notes.extend(f"{where}: unknown key {k!r} ignored" for k in v if k not in allowed)


def parse_rule(raw: Any, where: str) -> Rule:
    if not isinstance(raw, Mapping):
        raise RuleParseError(f"{where}: a rule must be a mapping")
    notes: list[str] = []
    _unknown(raw, _RULE_KEYS, where, notes)
    name = raw.get("name")
    if name is None:
        name = ""
    if not isinstance(name, str):
        raise RuleParseError(f"{where}.name: expected a string")
    return Rule(
        name=name,
        labels=_str_map(raw.get("labels"), f"{where}.labels"),
        labels_template=_template(raw.get("labelsTemplate"), f"{where}.labelsTemplate"),
        annotations=_str_map(raw.get("annotations"), f"{where}.annotations"),
        vars=_str_map(raw.get("vars"), f"{where}.vars"),
        vars_template=_template(raw.get("varsTemplate"), f"{where}.varsTemplate"),
        taints=_taints(raw.get("taints"), f"{where}.taints", notes),
        extended_resources=_str_map(raw.get("extendedResources"), f"{where}.extendedResources"),
        match_features=_matcher(raw.get("matchFeatures"), f"{where}.matchFeatures", notes),
        match_any=_match_any(raw.get("matchAny"), f"{where}.matchAny", notes),
        ignored=tuple(n.removeprefix(where + ".") for n in notes),
    )


def _scalar_str(v: Any, where: str) -> str:
    # YAML turns true/123 into bool/int; the API server would reject those for string
    # fields, and so do we.
    if isinstance(v, str):
        return v
    raise RuleParseError(f"{where}: expected a string, got {_kind(v)}")


def _kind(v: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "a mapping"}.get(
        type(v), type(v).__name__
    )


def _str_map(v: Any, where: str) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise RuleParseError(f"{where}: expected a mapping of strings")
    return {str(k): _scalar_str(val, f"{where}.{k}") for k, val in v.items()}


def _template(v: Any, where: str) -> Template | None:
    if v is None or v == "":
        return None
    return Template(_scalar_str(v, where))


def _list(v: Any, where: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise RuleParseError(f"{where}: expected a list")
    return v


def _entry(
    v: Any, where: str, allowed: frozenset[str], notes: list[str], what: str = "a mapping"
) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise RuleParseError(f"{where}: expected {what}")
    _unknown(v, allowed, where, notes)
    return v


def _taints(v: Any, where: str, notes: list[str]) -> tuple[Taint, ...]:
    out = []
    for i, raw in enumerate(_list(v, where)):
        at = f"{where}[{i}]"
        t = _entry(raw, at, _TAINT_KEYS, notes)
        key = t.get("key")
        if not isinstance(key, str) or not key:
            raise RuleParseError(f"{at}.key: required")
        value = t.get("value")
        effect = t.get("effect")
        out.append(
            Taint(
                key=key,
                value="" if value is None else _scalar_str(value, f"{at}.value"),
                effect="" if effect is None else _scalar_str(effect, f"{at}.effect"),
            )
        )
    return tuple(out)


def _match_any(v: Any, where: str, notes: list[str]) -> tuple[tuple[Term, ...], ...]:
    out = []
    for i, raw in enumerate(_list(v, where)):
        at = f"{where}[{i}]"
        elem = _entry({} if raw is None else raw, at, _MATCH_ANY_KEYS, notes, "a mapping with matchFeatures")
        out.append(_matcher(elem.get("matchFeatures"), f"{at}.matchFeatures", notes))
    return tuple(out)


def _matcher(v: Any, where: str, notes: list[str]) -> tuple[Term, ...]:
    return tuple(_term(t, f"{where}[{i}]", notes) for i, t in enumerate(_list(v, where)))


def _term(v: Any, where: str, notes: list[str]) -> Term:
    v = _entry(v, where, _TERM_KEYS, notes)
    feature = v.get("feature")
    feature = "" if feature is None else _scalar_str(feature, f"{where}.feature")
    exprs_raw = v.get("matchExpressions")
    exprs: tuple[tuple[str, Expr], ...] | None = None
    if exprs_raw is not None:
        if not isinstance(exprs_raw, Mapping):
            raise RuleParseError(f"{where}.matchExpressions: expected a mapping")
        exprs = tuple(
            (str(k), parse_expr(e, f"{where}.matchExpressions.{k}", notes)) for k, e in exprs_raw.items()
        )
    name_raw = v.get("matchName")
    name = None if name_raw is None else parse_expr(name_raw, f"{where}.matchName", notes)
    return Term(feature=feature, expressions=exprs, name=name)


def parse_expr(v: Any, where: str, notes: list[str] | None = None) -> Expr:
    if v is None:
        v = {}
    # Upstream's shorthand forms (still in its docs): a bare value or a list of values
    # means ``In``.
    if isinstance(v, bool):
        return Expr(op="In", values=("true" if v else "false",))
    if isinstance(v, str | int | float):
        return Expr(op="In", values=(str(v),))
    if isinstance(v, list):
        return Expr(op="In", values=tuple(_scalar_str(x, f"{where}[{i}]") for i, x in enumerate(v)))
    if not isinstance(v, Mapping):
        raise RuleParseError(f"{where}: expected a mapping with op and value")
    if notes is not None:
        _unknown(v, _EXPR_KEYS, where, notes)
    op = v.get("op")
    op = "" if op is None else _scalar_str(op, f"{where}.op")
    raw_values = v.get("value")
    if raw_values is None:
        values: tuple[str, ...] = ()
    elif isinstance(raw_values, list):
        values = tuple(_scalar_str(x, f"{where}.value[{i}]") for i, x in enumerate(raw_values))
    else:
        raise RuleParseError(f"{where}.value: expected a list of strings")
    typ = v.get("type")
    typ = "" if typ is None else _scalar_str(typ, f"{where}.type")
    regexes: tuple[re.Pattern[str], ...] | None = None
    if op == "InRegexp":
        try:
            regexes = tuple(re.compile(x) for x in values)
        except (re.error, OverflowError, RecursionError):  # a{99999999999}, ((((...
            regexes = None
    return Expr(op=op, values=values, type=typ, regexes=regexes)
