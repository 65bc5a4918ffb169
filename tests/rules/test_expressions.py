"""Every operator on flags, attributes and instances, as upstream v0.19 evaluates them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nfd.features import Features
from nfd.rules.expressions import EvalError, evaluate
from nfd.rules.model import parse_expr


def node() -> Features:
    f = Features()
    f.set_flags("t.flag", ["present", "10", "true"])
    f.set_attributes(
        "t.attr",
        {
            "num": "10",
            "neg": "-3",
            "word": "apparmor",
            "yes": "true",
            "no": "false",
            "ver": "5.15.0-91-generic",
        },
    )
    f.set_instances(
        "t.inst",
        [
            {"vendor": "8086", "device": "0b25", "num": "10"},
            {"vendor": "10de", "device": "2330", "num": "2"},
        ],
    )
    return f


def matches(h: SimpleNamespace, feature: str, exprs: dict[str, Any] | None = None, name: Any = None) -> bool:
    term: dict[str, Any] = {"feature": feature}
    if exprs is not None:
        term["matchExpressions"] = exprs
    if name is not None:
        term["matchName"] = name
    out = h.run(h.one_rule({"labels": {"hit": "true"}, "matchFeatures": [term]}), node())
    assert out.errors == [], out.errors
    return "hit" in out.labels


# op, values, {element: expected} for attribute values (num=10, neg=-3, word, yes, no)
ATTR_CASES = [
    ("In", ["10", "11"], {"num": True, "word": False, "missing": False}),
    ("NotIn", ["10"], {"num": False, "word": True, "missing": False}),
    ("InRegexp", ["^app", "^x"], {"word": True, "num": False, "missing": False}),
    ("Exists", [], {"num": True, "missing": False}),
    ("DoesNotExist", [], {"num": False, "missing": True}),
    ("Gt", ["9"], {"num": True, "neg": False}),
    ("Gt", ["10"], {"num": False}),
    ("Ge", ["10"], {"num": True, "neg": False}),
    ("Lt", ["10"], {"num": False, "neg": True}),
    ("Le", ["10"], {"num": True}),
    ("Le", ["-4"], {"neg": False}),
    ("GtLt", ["9", "11"], {"num": True, "neg": False}),
    ("GtLt", ["10", "11"], {"num": False}),
    ("GeLe", ["10", "11"], {"num": True}),
    ("GeLe", ["-3", "0"], {"neg": True, "num": False}),
    ("IsTrue", [], {"yes": True, "no": False, "word": False, "missing": False}),
    ("IsFalse", [], {"no": True, "yes": False, "missing": False}),
]


@pytest.mark.parametrize(("op", "values", "expect"), ATTR_CASES)
def test_every_operator_on_attributes(
    h: SimpleNamespace, op: str, values: list[str], expect: dict[str, bool]
) -> None:
    for element, want in expect.items():
        got = matches(h, "t.attr", {element: {"op": op, "value": values}})
        assert got is want, (op, values, element)


FLAG_CASES = [
    # Flags have no value: only existence decides; value operators never match.
    ("Exists", [], {"present": True, "absent": False}),
    ("DoesNotExist", [], {"present": False, "absent": True}),
    ("In", ["present"], {"present": False}),
    ("NotIn", ["x"], {"present": False}),
    ("InRegexp", ["."], {"present": False}),
    ("Gt", ["1"], {"10": False}),
    ("Ge", ["1"], {"10": False}),
    ("Lt", ["100"], {"10": False}),
    ("Le", ["100"], {"10": False}),
    ("GtLt", ["1", "100"], {"10": False}),
    ("GeLe", ["1", "100"], {"10": False}),
    ("IsTrue", [], {"true": False}),
    ("IsFalse", [], {"true": False}),
]


@pytest.mark.parametrize(("op", "values", "expect"), FLAG_CASES)
def test_every_operator_on_flags(
    h: SimpleNamespace, op: str, values: list[str], expect: dict[str, bool]
) -> None:
    for element, want in expect.items():
        assert matches(h, "t.flag", {element: {"op": op, "value": values}}) is want, (op, element)


INSTANCE_CASES = [
    ("In", ["8086"], "vendor", True),
    ("In", ["1234"], "vendor", False),
    ("NotIn", ["8086", "10de"], "vendor", False),
    ("NotIn", ["8086"], "vendor", True),  # the 10de instance
    ("InRegexp", ["^0b"], "device", True),
    ("Exists", [], "device", True),
    ("Exists", [], "serial", False),
    ("DoesNotExist", [], "serial", True),
    ("DoesNotExist", [], "vendor", False),
    ("Gt", ["5"], "num", True),
    ("Gt", ["10"], "num", False),
    ("Ge", ["10"], "num", True),
    ("Lt", ["2"], "num", False),
    ("Le", ["2"], "num", True),
    ("GtLt", ["2", "10"], "num", False),
    ("GeLe", ["2", "2"], "num", True),  # equal bounds: exactly 2
    ("GeLe", ["3", "2"], "num", None),  # bounds not ordered: an error
    ("GtLt", ["2", "2"], "num", None),  # GtLt with equal bounds could never match: an error
    ("GeLe", ["3", "10"], "num", True),
    ("IsTrue", [], "vendor", False),
    ("IsFalse", [], "vendor", False),
]


@pytest.mark.parametrize(("op", "values", "key", "want"), INSTANCE_CASES)
def test_every_operator_on_instances(
    h: SimpleNamespace, op: str, values: list[str], key: str, want: bool | None
) -> None:
    rs = h.one_rule(
        {
            "labels": {"hit": "true"},
            "matchFeatures": [{"feature": "t.inst", "matchExpressions": {key: {"op": op, "value": values}}}],
        }
    )
    out = h.run(rs, node())
    if want is None:
        assert out.errors and "value[0] must be less than value[1]" in out.errors[0].reason
    else:
        assert out.errors == []
        assert ("hit" in out.labels) is want


def test_instance_expressions_must_all_hold_for_one_instance(h: SimpleNamespace) -> None:
    # vendor of one device, device of the other: no single instance has both.
    assert not matches(
        h, "t.inst", {"vendor": {"op": "In", "value": ["8086"]}, "device": {"op": "In", "value": ["2330"]}}
    )
    assert matches(
        h, "t.inst", {"vendor": {"op": "In", "value": ["10de"]}, "device": {"op": "In", "value": ["2330"]}}
    )


@pytest.mark.parametrize(
    ("feature", "name", "want"),
    [
        ("t.flag", {"op": "In", "value": ["present"]}, True),
        ("t.flag", {"op": "InRegexp", "value": ["^pre"]}, True),
        ("t.flag", {"op": "NotIn", "value": ["present", "10", "true"]}, False),
        ("t.flag", {"op": "Exists"}, True),
        ("t.flag", {"op": "DoesNotExist"}, False),
        ("t.flag", {"op": "Gt", "value": ["5"]}, None),  # "present" is not a number: error
        ("t.attr", {"op": "In", "value": ["word"]}, True),
        ("t.attr", {"op": "IsTrue"}, False),
        ("t.inst", {"op": "In", "value": ["device"]}, True),
        ("t.inst", {"op": "In", "value": ["serial"]}, False),
    ],
)
def test_match_name(h: SimpleNamespace, feature: str, name: dict[str, Any], want: bool | None) -> None:
    rs = h.one_rule({"labels": {"hit": "true"}, "matchFeatures": [{"feature": feature, "matchName": name}]})
    out = h.run(rs, node())
    if want is None:
        assert out.errors and "not a number" in out.errors[0].reason
    else:
        assert out.errors == []
        assert ("hit" in out.labels) is want


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ({"op": "Like", "value": ["x"]}, "invalid Op"),
        ({"op": "Exists", "value": ["x"]}, "must be empty"),
        ({"op": "In", "value": []}, "must be non-empty"),
        ({"op": "InRegexp", "value": ["("]}, "valid regexps"),
        ({"op": "Gt", "value": ["1", "2"]}, "exactly one element"),
        ({"op": "GtLt", "value": ["1"]}, "exactly two elements"),
        ({"op": "Gt", "value": ["x"]}, "not a number"),
        ({"op": "Gt", "value": ["1"], "type": "semver"}, "invalid value type"),
        ({"op": "IsTrue", "value": ["x"]}, "must be empty"),
    ],
)
def test_invalid_expressions_fail_the_rule_with_a_reason(
    h: SimpleNamespace, expr: dict[str, Any], message: str
) -> None:
    rs = h.one_rule(
        {
            "labels": {"hit": "true"},
            "matchFeatures": [{"feature": "t.attr", "matchExpressions": {"num": expr}}],
        }
    )
    out = h.run(rs, node())
    assert out.labels == {}
    assert len(out.errors) == 1
    assert (out.errors[0].object, out.errors[0].rule) == ("obj", "r")
    assert message in out.errors[0].reason


def test_non_numeric_input_to_gt_is_an_error_as_upstream(h: SimpleNamespace) -> None:
    rs = h.one_rule(
        {
            "labels": {"hit": "true"},
            "matchFeatures": [
                {"feature": "t.attr", "matchExpressions": {"word": {"op": "Gt", "value": ["1"]}}}
            ],
        }
    )
    out = h.run(rs, node())
    assert "not a number 'apparmor'" in out.errors[0].reason


def test_empty_value_list_on_a_flag_is_no_match_not_an_error(h: SimpleNamespace) -> None:
    # Upstream checks In's values only when there is a value to compare: flags have none.
    assert not matches(h, "t.flag", {"present": {"op": "In", "value": []}})


def test_shorthand_forms() -> None:
    assert parse_expr(["0fff", "0eee"], "x").op == "In"
    assert parse_expr("8086", "x").values == ("8086",)
    assert parse_expr(True, "x").values == ("true",)
    assert parse_expr({"op": "Exists"}, "x").values == ()


def test_evaluate_any_op() -> None:
    e = parse_expr({}, "x")
    assert evaluate(e, False, None) is True
    with pytest.raises(EvalError):
        evaluate(parse_expr({"value": ["1"]}, "x"), True, "1")


def test_match_name_with_numeric_names(h: SimpleNamespace) -> None:
    f = Features()
    f.set_flags("t.num", ["10", "20"])
    rs = h.one_rule(
        {
            "labelsTemplate": "{{ range .t.num }}n{{ .Name }}=1\n{{ end }}",
            "matchFeatures": [{"feature": "t.num", "matchName": {"op": "Gt", "value": ["15"]}}],
        }
    )
    out = h.run(rs, f)
    assert out.errors == [] and out.labels == {"n20": "1"}


@pytest.mark.parametrize("regex", ["a{99999999999}", "(" * 2000 + ")" * 2000])
def test_a_regex_re_cannot_compile_for_size_fails_the_expression_only(regex: str) -> None:
    """re raises OverflowError and RecursionError, not re.error, for these: the rule
    is parsed, and the expression fails when evaluated, as one that does not compile."""
    e = parse_expr({"op": "InRegexp", "value": [regex]}, "x")
    with pytest.raises(EvalError, match="InRegexp"):
        evaluate(e, True, "a")
