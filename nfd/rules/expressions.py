"""Match expressions, evaluated as upstream v0.19 evaluates them.

Every check that upstream makes when an expression is evaluated (an unknown operator,
the wrong number of values, a value that is not a number) raises EvalError at the same
point, so a rule fails exactly when upstream's would. Errors that upstream never reaches
(an expression on a feature the node lacks) are not raised either.

Elements that matched are returned for templates in upstream's shape: flags as
``{"Name": n}``, attributes as ``{"Name": n, "Value": v}``, instances as their attribute
maps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from nfd.features import NullAttributes, NullFlags
from nfd.rules.model import OPS, Expr

Element = Mapping[str, str]

# ASCII digits only, as Go's parsers take them (Python's \d and int() take any script's).
_INT = re.compile(r"[+-]?[0-9]+")
_VERSION = re.compile(r"v?([0-9]+)(?:\.([0-9]+)(?:\.([0-9]+))?)?")
_INT64 = 1 << 63


class EvalError(Exception):
    """An expression or template that cannot be evaluated: the rule fails."""


def parse_int(s: str) -> int:
    """Go's strconv.Atoi: an optional sign and decimal digits, nothing else, within
    int64 (Atoi reports a larger number as out of range); else ValueError."""
    if _INT.fullmatch(s) is None:
        raise ValueError(s)
    n = int(s)  # ValueError past Python's digit limit too
    if not -_INT64 <= n < _INT64:
        raise ValueError(s)
    return n


def _atoi(s: str, what: str) -> int:
    try:
        return parse_int(s)
    except ValueError:
        raise EvalError(what) from None


def parse_version(s: str) -> tuple[int, int, int]:
    """``[v]major[.minor[.patch]]``; missing parts are 0 and text after the last number
    (``-13-amd64``) is ignored. A leading ``v`` is accepted and a sign is not, as
    upstream v0.19 parses versions (``v1.2.3`` compares as 1.2.3, ``-1`` is an error)."""
    m = _VERSION.match(s)
    if m is None:
        raise ValueError(s)
    major, minor, patch = m.groups()
    return int(major), int(minor or 0), int(patch or 0)


def bounds_ordered(op: str, lo: Any, hi: Any) -> bool:
    """The bounds of ``GtLt``/``GeLe`` as evaluation accepts them: ``GeLe`` takes equal
    bounds (that one value); ``GtLt`` could never match them."""
    return bool(lo < hi or (lo == hi and op == "GeLe"))


def _cmp_operands(e: Expr, value: str) -> tuple[Any, list[Any]]:
    if e.type == "version":
        try:
            left: Any = parse_version(value)
        except ValueError:
            raise EvalError(f"not a version {value!r}") from None
        right: list[Any] = []
        for v in e.values:
            try:
                right.append(parse_version(v))
            except ValueError:
                raise EvalError(f"not a version {v!r} in expression {e.describe()}") from None
        return left, right
    if e.type:
        raise EvalError(f"invalid value type {e.type!r} for Op {e.op!r} (supported: version)")
    left = _atoi(value, f"not a number {value!r}")
    right = [_atoi(v, f"not a number {v!r} in expression {e.describe()}") for v in e.values]
    return left, right


def evaluate(e: Expr, valid: bool, value: str | None) -> bool:
    """One expression against one input. ``valid``: the element exists; ``value``: its
    value (None for flags, which have none)."""
    op = e.op
    if op not in OPS:
        raise EvalError(f"invalid Op {op!r}")
    if op in ("", "Exists", "DoesNotExist"):
        if e.values:
            raise EvalError(
                f"invalid expression, 'value' field must be empty for Op {op!r} (have {list(e.values)})"
            )
        return True if op == "" else valid if op == "Exists" else not valid
    if not valid or value is None:
        return False
    if op in ("In", "NotIn", "InRegexp"):
        if not e.values:
            raise EvalError(f"invalid expression, 'value' field must be non-empty for Op {op!r}")
        if op == "In":
            return value in e.values
        if op == "NotIn":
            return value not in e.values
        if e.regexes is None:
            raise EvalError(
                f"invalid expression, 'value' field must only contain valid regexps for Op {op!r} (have {list(e.values)})"
            )
        return any(r.search(value) for r in e.regexes)
    if op in ("Gt", "Ge", "Lt", "Le"):
        if len(e.values) != 1:
            raise EvalError(
                f"invalid expression, 'value' field must contain exactly one element for Op {op!r} (have {list(e.values)})"
            )
        left, (right,) = _cmp_operands(e, value)
        return bool(
            (op == "Gt" and left > right)
            or (op == "Ge" and left >= right)
            or (op == "Lt" and left < right)
            or (op == "Le" and left <= right)
        )
    if op in ("GtLt", "GeLe"):
        if len(e.values) != 2:
            raise EvalError(
                f"invalid expression, 'value' field must contain exactly two elements for Op {op!r} (have {list(e.values)})"
            )
        v, (lo, hi) = _cmp_operands(e, value)
        if not bounds_ordered(op, lo, hi):
            raise EvalError(
                f"invalid expression, value[0] must be less than value[1] for Op {op!r} (have {list(e.values)})"
            )
        return bool(lo < v < hi) if op == "GtLt" else bool(lo <= v <= hi)
    # IsTrue / IsFalse
    if e.values:
        raise EvalError(
            f"invalid expression, 'value' field must be empty for Op {op!r} (have {list(e.values)})"
        )
    return value == ("true" if op == "IsTrue" else "false")


class Miss:
    """Why a term did not match (for --explain): the first failing expression and what
    it saw. Built only when asked for."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _saw(valid: bool, value: str | None) -> str:
    if not valid:
        return "absent"
    return "present" if value is None else f"{value!r}"


def match_values(exprs: Sequence[tuple[str, Expr]], values: Mapping[str, str]) -> tuple[bool, list[Element]]:
    """All expressions against one attribute map (one instance): upstream's MatchGetValues
    with fail-fast."""
    out: list[Element] = []
    for name, e in exprs:
        v = values.get(name)
        if not evaluate(e, v is not None, v):
            return False, []
        out.append({"Name": name, "Value": values.get(name, "")})
    return True, out


def _lookups(
    name: str, flags: set[str] | None, attrs: Mapping[str, str] | None
) -> Iterator[tuple[bool, str | None, Element]]:
    """The element ``name`` on each side of a feature that has one: whether it exists,
    its value (None for a flag) and what a match returns for it."""
    if flags is not None:
        yield name in flags, None, {"Name": name}
    if attrs is not None:
        v = attrs.get(name)
        yield v is not None, v, {"Name": name, "Value": "" if v is None else v}


def match_multi(
    exprs: Sequence[tuple[str, Expr]],
    flags: set[str] | None,
    attrs: Mapping[str, str] | None,
    instances: Sequence[Mapping[str, str]] | None,
    why: list[Miss] | None = None,
) -> tuple[bool, list[Element]]:
    """Upstream's MatchMulti: flags and attributes of a feature are matched as a union
    (an expression matches if it matches either), instances separately (an instance
    matches if every expression does); the feature matches if either side does."""
    # A feature whose element set is null takes part in no match (upstream passes a nil
    # map); an empty one still does (``matchExpressions: {}`` matches it).
    if isinstance(flags, NullFlags):
        flags = None
    if isinstance(attrs, NullAttributes):
        attrs = None
    elems: list[Element] = []
    ok = flags is not None or attrs is not None
    for name, e in exprs:
        hit = False
        denied: str | None = None
        for valid, value, elem in _lookups(name, flags, attrs):
            if evaluate(e, valid, value):
                hit = True
                elems.append(elem)
            elif e.op == "DoesNotExist":
                # DoesNotExist wants the name absent from both sides: one holding it fails.
                denied = f"{name} {e.describe()}: saw {_saw(True, value)}"
                break
        if hit and denied is None:
            continue
        ok = False
        elems = []
        if why is not None and denied is not None:
            why.append(Miss(denied))
        elif why is not None and (flags is not None or attrs is not None):
            if attrs is not None and name in attrs:
                seen = _saw(True, attrs[name])
            else:
                seen = _saw(flags is not None and name in flags, None)
            why.append(Miss(f"{name} {e.describe()}: saw {seen}"))
        break
    elems.sort(key=lambda el: el["Name"])

    matched_instances: list[Element] = []
    for inst in instances or ():
        m, _ = match_values(exprs, inst)
        if m:
            matched_instances.append(inst)
    if instances is not None and not matched_instances and why is not None and not ok:
        why.append(Miss(_instance_miss(exprs, instances)))
    ok = ok or bool(matched_instances)
    elems.extend(matched_instances)
    return ok, elems


def _instance_miss(exprs: Sequence[tuple[str, Expr]], instances: Sequence[Mapping[str, str]]) -> str:
    if not instances:
        return "no instances"
    # Report what the first instance failed on: usually enough to see the mismatch.
    inst = instances[0]
    for name, e in exprs:
        v = inst.get(name)
        if not evaluate(e, v is not None, v):
            more = (
                f" (and {len(instances) - 1} other instance(s) did not match either)"
                if len(instances) > 1
                else ""
            )
            return f"no instance matched: first instance has {name}={_saw(v is not None, v)}, want {e.describe()}{more}"
    return "no instance matched"


def _name_test(e: Expr, sample: str) -> Callable[[str], bool]:
    """A fast test equivalent to ``evaluate(e, True, name)`` for element names. Evaluates
    ``sample`` (a real name) first so that a bad expression raises as upstream's does,
    and only when there is a name to test."""
    evaluate(e, True, sample)
    op = e.op
    if op in ("", "Exists"):
        return lambda _k: True
    if op == "DoesNotExist":
        return lambda _k: False
    if op == "In":
        values = frozenset(e.values)
        return values.__contains__
    if op == "NotIn":
        values = frozenset(e.values)
        return lambda k: k not in values
    if op == "InRegexp" and e.regexes is not None:
        regexes = e.regexes
        return lambda k: any(r.search(k) for r in regexes)
    return lambda k: evaluate(e, True, k)


def match_names(
    e: Expr,
    flags: set[str] | None,
    attrs: Mapping[str, str] | None,
    instances: Sequence[Mapping[str, str]] | None,
) -> tuple[bool, list[Element]]:
    """Upstream's MatchNamesMulti: the expression against element names (flags,
    attributes) and the attribute names of each instance."""
    sample = next(iter(flags or ()), None) or next(iter(attrs or ()), None)
    if sample is None:
        sample = next((k for inst in instances or () for k in inst), None)
    if sample is None:
        return False, []
    test = _name_test(e, sample)
    ret: list[Element] = []
    if e.op == "In" and flags:
        ret.extend({"Name": k} for k in set(e.values) if k in flags)
    else:
        ret.extend({"Name": k} for k in flags or () if test(k))
    if e.op == "In" and attrs:
        ret.extend({"Name": k, "Value": attrs[k]} for k in set(e.values) if k in attrs)
    else:
        ret.extend({"Name": k, "Value": v} for k, v in (attrs or {}).items() if test(k))
    ret.sort(key=lambda el: el["Name"])
    for inst in instances or ():
        if any(test(k) for k in inst):
            ret.append(inst)
    return bool(ret), ret
