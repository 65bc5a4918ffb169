"""Label and field selectors, with the API server's syntax and error messages."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .errors import ApiError, bad_request

Matcher = Callable[[Mapping[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([^\s!=()]+)\s*(==|=|!=)\s*([^\s!=()]*)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside ``(...)``."""
    terms, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def label_matcher(selector: str | None) -> Matcher:
    """A predicate over an object's labels; raises ApiError(400) for a malformed selector."""
    if not selector or not selector.strip():
        return lambda _labels: True
    checks: list[Matcher] = []
    for term in _split_terms(selector):
        m = _EQ_RE.match(term)
        if m:
            key, op, value = m.groups()
            if op == "!=":
                checks.append(lambda lb, k=key, v=value: lb.get(k) != v)
            else:
                checks.append(lambda lb, k=key, v=value: k in lb and lb[k] == v)
            continue
        m = _SET_RE.match(term)
        if not m:
            raise bad_request(
                f"unable to parse requirement: found '{term.strip()}', expected: valid label selector"
            )
        neg, key, op, values = m.groups()
        if op:
            if neg:
                raise bad_request(f"unable to parse requirement: '{term.strip()}'")
            vals = frozenset(v.strip() for v in values.split(",") if v.strip())
            if op == "in":
                checks.append(lambda lb, k=key, vs=vals: lb.get(k) in vs)
            else:
                checks.append(lambda lb, k=key, vs=vals: lb.get(k) not in vs)
        elif neg:
            checks.append(lambda lb, k=key: k not in lb)
        else:
            checks.append(lambda lb, k=key: k in lb)
    return lambda labels: all(c(labels) for c in checks)


def _field_value(obj: Mapping[str, Any], dotted: str) -> str:
    cur: Any = obj
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_matcher(selector: str | None, supported: frozenset[str]) -> Matcher:
    """A predicate over a whole object. Only the fields in ``supported`` may be used, as
    the API server allows only a few per resource."""
    if not selector or not selector.strip():
        return lambda _obj: True
    checks: list[Matcher] = []
    for term in _split_terms(selector):
        m = _EQ_RE.match(term)
        if not m:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{term.strip()}'")
        key, op, value = m.groups()
        if key not in supported:
            raise ApiError(400, f"field label not supported: {key}")
        if op == "!=":
            checks.append(lambda o, k=key, v=value: _field_value(o, k) != v)
        else:
            checks.append(lambda o, k=key, v=value: _field_value(o, k) == v)
    return lambda obj: all(c(obj) for c in checks)
