from decimal import Decimal

import pytest

from nfd.decision import decide
from nfd.features import Features
from nfd.policy import (
    Policy,
    check_extended_resource,
    check_label,
    check_taint,
    parse_quantity,
    qualify,
)


def test_unprefixed_names_get_the_feature_namespace() -> None:
    assert qualify("cpu-cpuid.AVX") == "feature.node.kubernetes.io/cpu-cpuid.AVX"
    assert qualify("vendor.io/x") == "vendor.io/x"


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("feature.node.kubernetes.io/a", True),
        ("sub.feature.node.kubernetes.io/a", True),
        ("profile.node.kubernetes.io/a", True),
        ("kubernetes.io/a", False),
        ("node.kubernetes.io/a", False),
        # Upstream v0.19 denies only kubernetes.io and its sub-namespaces by default.
        ("k8s.io/a", False),
        ("x.k8s.io/a", False),
        ("nvidia.com/gpu.count", True),
        ("intel.feature.node.kubernetes.io/gpu", True),
    ],
)
def test_default_namespace_policy(name: str, allowed: bool) -> None:
    assert (check_label(name, "true") is None) is allowed


def test_extra_and_deny() -> None:
    p = Policy.build(extra_label_ns=["node.kubernetes.io"], deny_label_ns=["*.evil.com,bad.org"])
    assert check_label("node.kubernetes.io/a", "1", p) is None
    assert check_label("x.evil.com/a", "1", p) is not None
    assert check_label("bad.org/a", "1", p) is not None
    assert check_label("good.org/a", "1", p) is None


def test_whitelist_is_a_search_on_the_name_part() -> None:
    p = Policy.build(label_whitelist="cpuid")
    d = decide(labels={"cpu-cpuid.AVX": "true", "kernel-version.major": "6"}, features=Features(), policy=p)
    assert d.labels == {"feature.node.kubernetes.io/cpu-cpuid.AVX": "true"}
    reason = d.rejected["labels"]["feature.node.kubernetes.io/kernel-version.major"]
    assert "does not match the label whitelist" in reason


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("a/b/c", "1"),
        ("-bad", "1"),
        ("x" * 64, "1"),
        ("ok", "x" * 64),
        ("ok", "bad value"),
        ("UP.case/x", "1"),
        ("ok-", "1"),
        ("ok", "-v"),
        ("ok", "v\n"),  # a whole match: no line end slips through
        ("é", "1"),  # ASCII only, as Kubernetes' expressions
        ("ok", "٣"),
        ("a..b.io/x", "1"),
    ],
)
def test_invalid_names_and_values_are_rejected(name: str, value: str) -> None:
    assert check_label(qualify(name), value) is not None


@pytest.mark.parametrize(
    ("name", "value"),
    [("a", ""), ("a.b_c-d", "A-9.z_Y"), ("vendor-1.io/X", "1"), ("x" * 63, "y" * 63), ("9", "0")],
)
def test_valid_names_and_values_pass(name: str, value: str) -> None:
    assert check_label(qualify(name), value) is None


def test_bad_whitelist_regex() -> None:
    with pytest.raises(ValueError, match="not a valid regex"):
        Policy.build(label_whitelist="(")


@pytest.mark.parametrize(
    ("text", "value"),
    [("4", 4), ("100m", Decimal("0.1")), ("1Gi", 2**30), ("1e3", 1000), ("1.5k", 1500), ("+2", 2)],
)
def test_quantities(text: str, value: object) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.2.3", "abc", "1Gb", " 1", "1 "])
def test_bad_quantities(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_extended_resources_and_taints() -> None:
    assert check_extended_resource("sgx.intel.com/epc", "8Gi") is None
    assert "not a valid quantity" in (check_extended_resource("vendor.io/x", "lots") or "")
    assert "disabled" in (check_taint("vendor.io/t", "v", "NoSchedule") or "")
    on = Policy.build(enable_taints=True)
    assert check_taint("vendor.io/t", "v", "NoSchedule", on) is None
    assert "effect" in (check_taint("vendor.io/t", "v", "Sometimes", on) or "")


def test_a_whitelist_re_cannot_compile_is_a_value_error() -> None:
    """re raises OverflowError and RecursionError too, not only re.error."""
    for bad in ("a{99999999999}", "(" * 2000 + ")" * 2000):
        with pytest.raises(ValueError, match="is not a valid regex"):
            Policy.build(label_whitelist=bad)
