"""The patch and selector functions on their own (RFC 6902 / 7386 cases)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakeapi.errors import ApiError
from tests.fakeapi.patch import (
    PatchError,
    PatchFormatError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from tests.fakeapi.selectors import field_matcher, label_matcher

DOC = {"a": {"b~c": 1, "d/e": 2, "list": [1, 2, 3]}, "x": "y"}


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ([{"op": "add", "path": "/a/new", "value": True}], {**DOC, "a": {**DOC["a"], "new": True}}),
        ([{"op": "remove", "path": "/a/b~0c"}], {**DOC, "a": {"d/e": 2, "list": [1, 2, 3]}}),
        ([{"op": "replace", "path": "/a/d~1e", "value": 5}], {**DOC, "a": {**DOC["a"], "d/e": 5}}),
        ([{"op": "add", "path": "/a/list/-", "value": 4}], {**DOC, "a": {**DOC["a"], "list": [1, 2, 3, 4]}}),
        ([{"op": "add", "path": "/a/list/0", "value": 0}], {**DOC, "a": {**DOC["a"], "list": [0, 1, 2, 3]}}),
        ([{"op": "move", "from": "/x", "path": "/z"}], {"a": DOC["a"], "z": "y"}),
        ([{"op": "copy", "from": "/x", "path": "/z"}], {**DOC, "z": "y"}),
        ([{"op": "test", "path": "/a/list", "value": [1, 2, 3]}], DOC),
        ([{"op": "test", "path": "/a/list/0", "value": 1.0}], DOC),
        # As the API server's library: replace sets a missing member, test of a missing
        # member against null passes.
        ([{"op": "replace", "path": "/nope", "value": 1}], {**DOC, "nope": 1}),
        ([{"op": "test", "path": "/missing", "value": None}], DOC),
    ],
)
def test_json_patch_ops(ops: list[dict[str, Any]], expected: Any) -> None:
    before = repr(DOC)
    assert apply_json_patch(DOC, ops) == expected
    assert repr(DOC) == before  # the input is untouched


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/x", "value": "z"}],
        [{"op": "test", "path": "/missing", "value": "x"}],
        [{"op": "test", "path": "/x", "value": None}],
        [{"op": "test", "path": "/a/list/0", "value": True}],  # 1 is not true
        [{"op": "remove", "path": "/nope"}],
        [{"op": "replace", "path": "/nope/deeper", "value": 1}],
        [{"op": "replace", "path": "/a/list/3", "value": 1}],
        [{"op": "add", "path": "/nope/deeper", "value": 1}],
        [{"op": "add", "path": "/a/list/9", "value": 1}],
        [{"op": "add", "path": "/ok", "value": 1}, {"op": "test", "path": "/x", "value": "no"}],
    ],
)
def test_json_patch_failures(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(PatchError):
        apply_json_patch(DOC, ops)


@pytest.mark.parametrize(
    "body", [{"op": "add"}, [{"op": "bogus", "path": "/x"}], [{"op": "add", "path": "x", "value": 1}], [3]]
)
def test_json_patch_malformed(body: Any) -> None:
    with pytest.raises(PatchFormatError):
        apply_json_patch(DOC, body)


def test_merge_patch_rfc7386() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "l": [1]}
    assert apply_merge_patch(target, {"a": "z", "c": {"f": None}, "l": [2]}) == {
        "a": "z",
        "c": {"d": "e"},
        "l": [2],
    }
    assert apply_merge_patch({"a": 1}, {"a": {"b": None}}) == {"a": {}}


def test_strategic_merge_patch() -> None:
    target = {
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        "metadata": {"labels": {"a": "1"}},
    }
    out = apply_strategic_merge_patch(
        target,
        {
            "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "X", "status": "True"}]},
            "metadata": {"labels": {"a": None, "b": "2"}},
        },
    )
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "False"},
        {"type": "X", "status": "True"},
    ]
    assert out["metadata"]["labels"] == {"b": "2"}
    out = apply_strategic_merge_patch(target, {"metadata": {"labels": {"$patch": "replace", "only": "1"}}})
    assert out["metadata"]["labels"] == {"only": "1"}
    out = apply_strategic_merge_patch(
        target, {"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}}
    )
    assert out["status"]["conditions"] == []


def test_label_selectors() -> None:
    labels = {"a": "1", "b": "2"}
    for sel, want in [
        ("a=1", True),
        ("a==1", True),
        ("a!=1", False),
        ("c!=1", True),
        ("a", True),
        ("!a", False),
        ("a in (1,3)", True),
        ("a notin (1)", False),
        ("a=1,b=3", False),
        ("b in (2), !c", True),
        ("", True),
    ]:
        assert label_matcher(sel)(labels) is want, sel
    with pytest.raises(ApiError) as e:
        label_matcher("a in (1")
    assert e.value.code == 400


def test_field_selectors() -> None:
    obj = {"metadata": {"name": "n"}, "spec": {"unschedulable": True}}
    fields = frozenset({"metadata.name", "spec.unschedulable"})
    assert field_matcher("metadata.name=n", fields)(obj)
    assert not field_matcher("metadata.name!=n", fields)(obj)
    assert field_matcher("spec.unschedulable=true", fields)(obj)
    with pytest.raises(ApiError):
        field_matcher("status.phase=x", fields)
