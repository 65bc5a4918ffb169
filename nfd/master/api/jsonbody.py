"""A worker's request body into JSON values, or the reasons it cannot be (FastAPI's
422 shape: a list of ``{"loc", "msg", "type"}``).

The body must be UTF-8 JSON nesting at most ``MAX_DEPTH`` levels, with no NaN or
infinity and no lone surrogate escapes. pydantic-core's parser (jiter) checks all of
this in one pass, faster than ``json.loads``, and stops at its recursion limit instead
of recursing as deep as the body goes: a body of ``[[[[...`` costs bounded work.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from nfd.master.api.models import FEATURES_BODY, GROUP_REF_PATTERN, FeaturesRequest

_GROUP_REF = re.compile(GROUP_REF_PATTERN)

MAX_DEPTH = 200
"""Deepest nesting of arrays and objects a body may have: the parser's recursion limit
(the wire format needs 6)."""


class BodyError(Exception):
    """The body cannot be used; ``issues`` say why, in FastAPI's validation-error shape."""

    def __init__(self, issues: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(str(i["msg"]) for i in issues))
        self.issues = issues


def _issue(msg: str, kind: str, *loc: str | int) -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": msg, "type": kind}


def parse(body: bytes) -> Any:
    """The body's JSON value; raises BodyError (not UTF-8, not JSON, too deep)."""
    try:
        body.decode("utf-8")  # for the message: the parser would say "invalid unicode code point"
    except UnicodeDecodeError as e:
        raise BodyError([_issue(f"the body is not UTF-8 (byte {e.start})", "utf8_invalid")]) from None
    try:
        return from_json(body, allow_inf_nan=False)
    except ValueError as e:
        if "recursion limit" in str(e):
            raise BodyError([_issue(f"JSON nests deeper than {MAX_DEPTH} levels", "json_too_deep")]) from None
        raise BodyError([_issue(f"JSON decode error: {e}", "json_invalid")]) from None


def check(model: type[BaseModel], data: Any) -> None:
    """``data`` against ``model``; raises BodyError naming each field that fails."""
    try:
        model.model_validate(data)
    except ValidationError as e:
        raise BodyError(
            [_issue(err["msg"], err["type"], *err["loc"]) for err in e.errors(include_url=False)]
        ) from None


def parse_features(body: bytes) -> Any:
    """``parse`` then ``check`` against FeaturesRequest, in one pass of pydantic-core
    when the body is good: ``FEATURES_BODY`` is the model's shape as TypedDicts,
    validated as it is parsed, answering plain dicts (a third less CPU than the two
    steps). A body it refuses takes the two steps for their messages. So does one with a flag
    element's value that is not empty (no worker sends one): ``FEATURES_BODY`` takes
    NaN and Infinity there, which ``parse`` refuses, and one with a group's ``ref`` that
    does not go with its ``elements`` (``models.SentFeatures``)."""
    try:
        data = FEATURES_BODY.validate_json(body)
    except ValidationError:
        data = None
    if (
        data is not None
        and not any(
            any((group.get("elements") or _EMPTY).values())
            for group in data["features"].get("flags", _EMPTY).values()
        )
        and _refs_fit(data["features"])
    ):
        return data
    data = parse(body)
    check(FeaturesRequest, data)
    return data


def _refs_fit(features: Any) -> bool:
    """Each group has its elements and no ref, or null elements and a ref (``models.SentFeatures``)."""
    for groups in features.values():
        for group in groups.values():
            ref = group.get("ref")
            if group.get("elements", _EMPTY) is None:
                if not isinstance(ref, str) or _GROUP_REF.fullmatch(ref) is None:
                    return False
            elif ref is not None:
                return False
    return True


_EMPTY: dict[str, Any] = {}
