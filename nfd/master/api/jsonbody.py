"""A worker's request body into JSON values, or the reasons it cannot be (FastAPI's
422 shape: a list of ``{"loc", "msg", "type"}``).

The body must be UTF-8 JSON nesting at most ``MAX_DEPTH`` levels. The depth is checked
before parsing, in a few passes of C string operations (never a Python loop over the
bytes), so a body of ``[[[[...`` costs bounded work and never reaches the parser's
recursion limit.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a body may have (the wire format needs 6)."""

_STRING = re.compile(rb'"[^"]*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class BodyError(Exception):
    """The body cannot be used; ``issues`` say why, in FastAPI's validation-error shape."""

    def __init__(self, issues: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(str(i["msg"]) for i in issues))
        self.issues = issues


def _issue(msg: str, kind: str, *loc: str | int) -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": msg, "type": kind}


def nests_deeper_than(body: bytes, limit: int) -> bool:
    """Whether the JSON text's arrays and objects nest deeper than ``limit`` (brackets
    inside strings do not count)."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    # Escaped quotes and backslashes first, so that every remaining '"' opens or closes
    # a string; then the strings; then everything but the brackets.
    s = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    s = _STRING.sub(b"", s).translate(None, _NOT_BRACKETS)
    # Each pass removes the pairs that are innermost when it starts (one level): a
    # document `depth` deep is gone after `depth` passes; one still changing after
    # `limit` passes is deeper.
    for _ in range(limit):
        t = _INNERMOST.sub(b"", s)
        if t == s:
            return False
        s = t
    return _INNERMOST.sub(b"", s) != s


def parse(body: bytes) -> Any:
    """The body's JSON value; raises BodyError (not UTF-8, not JSON, too deep)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BodyError([_issue(f"the body is not UTF-8 (byte {e.start})", "utf8_invalid")]) from None
    if nests_deeper_than(body, MAX_DEPTH):
        raise BodyError([_issue(f"JSON nests deeper than {MAX_DEPTH} levels", "json_too_deep")])
    try:
        return json.loads(text)
    except ValueError as e:
        raise BodyError([_issue(f"JSON decode error: {e}", "json_invalid")]) from None


def check(model: type[BaseModel], data: Any) -> None:
    """``data`` against ``model``; raises BodyError naming each field that fails."""
    try:
        model.model_validate(data)
    except ValidationError as e:
        raise BodyError(
            [_issue(err["msg"], err["type"], *err["loc"]) for err in e.errors(include_url=False)]
        ) from None
