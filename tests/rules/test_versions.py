"""The comparison operators with ``type: version`` and the bounds of the range operators.

What upstream's own expression tests hold: versions ``%d``, ``%d.%d`` and ``%d.%d.%d``
compare numerically; a value that is not a version (``str``, a negative number) fails
the rule with an error, on the node's side as in the expression; an element the node
lacks is no match and no error. Besides: a leading ``v`` is part of the version syntax
on either side, ``GeLe`` takes equal bounds (that one version), ``GtLt`` does not.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nfd.features import Features
from nfd.rules import lint_rulesets
from nfd.rules.expressions import parse_version

ERROR = "error"


def outcome(
    h: SimpleNamespace, node_value: str | None, op: str, values: list[str], typ: str = "version"
) -> object:
    """True/False for a match, ERROR when the rule fails."""
    f = Features()
    f.set_attributes("t.attr", {} if node_value is None else {"ver": node_value})
    expr: dict[str, object] = {"op": op, "value": values}
    if typ:
        expr["type"] = typ
    rs = h.one_rule(
        {
            "labels": {"hit": "true"},
            "matchFeatures": [{"feature": "t.attr", "matchExpressions": {"ver": expr}}],
        }
    )
    out = h.run(rs, f)
    if out.errors:
        return ERROR
    return "hit" in out.labels


@pytest.mark.parametrize(
    ("node_value", "op", "values", "want"),
    [
        ("5.15.0-91-generic", "Gt", ["5.4"], True),
        ("5.15.0-91-generic", "Gt", ["5.15"], False),  # 5.15.0 is not greater than 5.15(.0)
        ("5.15.0-91-generic", "Ge", ["5.15"], True),
        ("5.15.0-91-generic", "Lt", ["5.16.0"], True),
        ("5.15.0-91-generic", "Le", ["5"], False),
        ("5.15.0-91-generic", "GtLt", ["5.10", "6"], True),
        ("5.15.0-91-generic", "GeLe", ["5.15.0", "5.15.1"], True),
        ("5.15.0", "Gt", ["5.9"], True),  # numerically, not as text
        ("2.0", "Gt", ["2"], False),
        ("2.0.2", "Gt", ["2.0.1"], True),
        ("1.9", "Ge", ["2.0"], False),
        ("2.0.0", "Lt", ["2.0.1"], True),
        ("2.1", "Le", ["2.0"], False),
        ("1.0", "GtLt", ["1.0", "10.0"], False),
        ("10.0.1", "GeLe", ["1.0.1", "10.0.1"], True),
        # a leading v in the expression
        ("1.2.3", "Gt", ["v1.2.2"], True),
        ("1.2.3", "Ge", ["v1.2.3"], True),
        ("1.2.3", "Lt", ["v1.2.4"], True),
        ("1.2.3", "Le", ["v1.2.3"], True),
        ("1.2.3", "Lt", ["v1.2.3"], False),
        ("1.2.3", "GtLt", ["v1.2", "v1.3"], True),
        ("1.2.3", "GeLe", ["v1.2.3", "1.2.3"], True),
        # a leading v in the node's value
        ("v1.2.3", "Gt", ["1.2.2"], True),
        ("v1.2.3", "Ge", ["1.2.3"], True),
        ("v1.2.3", "Lt", ["1.2.3"], False),
        ("v1.2.3", "Le", ["1.2.3"], True),
        ("v1.2.3", "GtLt", ["1.2", "1.3"], True),
        ("v1.2.4", "GeLe", ["1.2.3", "1.2.4"], True),
        # on both sides
        ("v1.2.3", "Gt", ["v1.2.3"], False),
        ("v6", "GeLe", ["v5.99", "v6.0.0"], True),
    ],
)
def test_version_comparisons(
    h: SimpleNamespace, node_value: str, op: str, values: list[str], want: bool
) -> None:
    assert outcome(h, node_value, op, values) is want


@pytest.mark.parametrize("typ", ["version", ""])
def test_gele_takes_equal_bounds_and_gtlt_does_not(h: SimpleNamespace, typ: str) -> None:
    bound = "2" if not typ else "1.2.3"
    above, below = ("3", "1") if not typ else ("1.2.4", "1.2.2")
    assert outcome(h, bound, "GeLe", [bound, bound], typ) is True
    assert outcome(h, above, "GeLe", [bound, bound], typ) is False
    assert outcome(h, below, "GeLe", [bound, bound], typ) is False
    assert outcome(h, bound, "GtLt", [bound, bound], typ) == ERROR
    assert outcome(h, bound, "GeLe", [above, bound], typ) == ERROR  # not ordered
    assert outcome(h, bound, "GtLt", [above, bound], typ) == ERROR


@pytest.mark.parametrize(("typ", "bounds"), [("version", ["v1.2", "1.2.0"]), ("", ["2", "2"])])
def test_lint_agrees_with_evaluation_on_equal_bounds(h: SimpleNamespace, typ: str, bounds: list[str]) -> None:
    def problems(op: str) -> list[str]:
        expr = {"op": op, "value": bounds, "type": typ}
        rs = h.one_rule(
            {
                "labels": {"hit": "true"},
                "matchFeatures": [{"feature": "t.attr", "matchExpressions": {"ver": expr}}],
            }
        )
        return [e.reason for e in lint_rulesets(rs)]

    assert problems("GeLe") == []
    assert problems("GtLt") == [
        f"matchFeatures[0].matchExpressions.ver: value[0] must be less than value[1] for Op 'GtLt' (have {bounds})"
    ]


@pytest.mark.parametrize("op", ["Gt", "Ge", "Lt", "Le", "GtLt", "GeLe"])
def test_what_is_not_a_version_fails_the_rule(h: SimpleNamespace, op: str) -> None:
    values = ["1", "10"] if op in ("GtLt", "GeLe") else ["2"]
    for bad_node in ("str", "-11", "+1", "vv1", ""):
        assert outcome(h, bad_node, op, values) == ERROR, bad_node
    bad_values = ["x", "10"] if op in ("GtLt", "GeLe") else ["-2"]
    assert outcome(h, "5", op, bad_values) == ERROR
    # An element the node lacks is no match, not an error.
    assert outcome(h, None, op, values) is False


def test_without_the_version_type_a_leading_v_is_not_a_number(h: SimpleNamespace) -> None:
    assert outcome(h, "v2", "Gt", ["1"], "") == ERROR
    assert outcome(h, "2", "Gt", ["v1"], "") == ERROR


def test_parse_version() -> None:
    assert parse_version("6") == (6, 0, 0)
    assert parse_version("6.8") == (6, 8, 0)
    assert parse_version("6.8.0-45-generic") == (6, 8, 0)
    assert parse_version("v6") == (6, 0, 0)
    assert parse_version("v1.2.3") == (1, 2, 3)
    for bad in ("-11", "+1", "vv1", "x1", ""):
        with pytest.raises(ValueError):
            parse_version(bad)


def test_numbers_are_ascii_digits_within_int64_as_go_parses_them(h: SimpleNamespace) -> None:
    # Other scripts' digits are digits to Python, not to Go.
    assert outcome(h, "\u0663", "Gt", ["1"], "") == ERROR
    assert outcome(h, "3", "Gt", ["\u0661"], "") == ERROR
    assert outcome(h, "\u0663.1", "Gt", ["1"]) == ERROR
    assert outcome(h, "3", "GtLt", ["1", "\u0665"]) == ERROR
    # strconv.Atoi's range is int64's.
    assert outcome(h, "9223372036854775807", "Gt", ["-9223372036854775808"], "") is True
    assert outcome(h, "9223372036854775808", "Gt", ["1"], "") == ERROR
    assert outcome(h, "1", "Lt", ["-9223372036854775809"], "") == ERROR


def test_a_number_too_long_for_python_is_the_rule_s_error_not_an_internal_one(h: SimpleNamespace) -> None:
    f = Features()
    f.set_attributes("t.attr", {"ver": "9" * 5000})
    rs = h.one_rule(
        {
            "labels": {"hit": "true"},
            "matchFeatures": [
                {"feature": "t.attr", "matchExpressions": {"ver": {"op": "Gt", "value": ["1"]}}}
            ],
        }
    )
    (error,) = h.run(rs, f).errors
    assert error.reason.startswith("not a number '9999"), error.reason


@pytest.mark.parametrize("value", ["\u0662", "99999999999999999999"])
def test_lint_takes_numbers_as_evaluation_does(h: SimpleNamespace, value: str) -> None:
    rs = h.one_rule(
        {
            "labels": {"hit": "true"},
            "matchFeatures": [
                {"feature": "t.attr", "matchExpressions": {"ver": {"op": "Gt", "value": [value]}}}
            ],
        }
    )
    assert [e.reason for e in lint_rulesets(rs)] == [
        f"matchFeatures[0].matchExpressions.ver: every value of Op 'Gt' must be an integer (have {[value]})"
    ]
