"""The master's policy applied to rule output through ``nfd.decision.decide``: prefixing,
dynamic values, namespaces per kind, quantities, taint gating."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import SimpleNamespace

import pytest

from nfd.decision import Decision, decide
from nfd.features import Features
from nfd.policy import (
    DEFAULT_POLICY,
    Policy,
    check_annotation,
    check_extended_resource,
    check_label,
    check_taint,
)
from nfd.rules import RuleOutput
from nfd.taint import Taint

NS = "feature.node.kubernetes.io/"


def feats() -> Features:
    f = Features()
    f.set_attributes("cpu.security", {"sgx.enabled": "true", "sgx.epc": "8589934592"})
    f.set_attributes("kernel.version", {"major": "6", "full": "6.8.0-45-generic"})
    f.set_attributes("kernel.config", {"LSM": "lockdown,yama"})
    f.set_flags("cpu.cpuid", ["AVX"])
    return f


def publish(
    *,
    labels: Mapping[str, str],
    features: Features,
    annotations: Mapping[str, str] = {},
    extended_resources: Mapping[str, str] = {},
    taints: Iterable[tuple[str, str, str]] = (),
    matched: dict[str, str] | None = None,
    policy: Policy = DEFAULT_POLICY,
) -> Decision:
    """Rule output with just these items, decided."""
    out = RuleOutput(
        annotations=dict(annotations),
        extended_resources=dict(extended_resources),
        taints=[Taint(*t) for t in taints],
        matched=matched or {},
    )
    return decide(labels=labels, rules=out, features=features, policy=policy)


def test_unprefixed_names_are_prefixed_and_prefixed_spelling_wins() -> None:
    pub = publish(
        labels={"a": "1", "b": "x", NS + "b": "y"},
        annotations={"n": "v"},
        extended_resources={"r": "2"},
        features=feats(),
    )
    assert pub.labels == {NS + "a": "1", NS + "b": "y"}
    assert pub.annotations == {NS + "n": "v"}
    assert pub.extended_resources == {NS + "r": "2"}


def test_dynamic_values() -> None:
    pub = publish(
        labels={
            "major": "@kernel.version.major",
            "rule": "@rule.matched.x",
            "bad": "@kernel.version",
            "gone": "@kernel.nosuch.x",
            "flag": "@cpu.cpuid.AVX",
        },
        extended_resources={
            "sgx.intel.com/epc": "@cpu.security.sgx.epc",
            "vendor.io/x": "@cpu.security.nosuch",
        },
        features=feats(),
        matched={"x": "from-rule"},
    )
    assert pub.labels == {NS + "major": "6", NS + "rule": "from-rule"}
    assert pub.extended_resources == {"sgx.intel.com/epc": "8589934592"}
    rej = pub.rejected
    assert "not in the form of '@domain.feature.element'" in rej["labels"][NS + "bad"]
    assert rej["labels"][NS + "gone"] == "feature kernel.nosuch not found"
    assert rej["labels"][NS + "flag"] == "feature cpu.cpuid not found"  # only attributes
    assert rej["extendedResources"]["vendor.io/x"] == "element nosuch not found on feature cpu.security"


def test_annotations_are_not_resolved_dynamically() -> None:
    pub = publish(labels={}, annotations={"a": "@kernel.version.major"}, features=feats())
    assert pub.annotations == {NS + "a": "@kernel.version.major"}


@pytest.mark.parametrize(
    ("ns", "label", "other"),
    [
        ("feature.node.kubernetes.io", True, True),
        ("sub.feature.node.kubernetes.io", True, True),
        ("profile.node.kubernetes.io", True, False),
        ("sub.profile.node.kubernetes.io", True, False),
        ("kubernetes.io", False, False),
        ("node.kubernetes.io", False, False),
        ("nfd.node.kubernetes.io", False, False),
        ("k8s.io", False, False),
        ("sub.k8s.io", False, False),
        ("vendor.io", True, True),
    ],
)
def test_namespaces_per_kind(ns: str, label: bool, other: bool) -> None:
    on = Policy.build(enable_taints=True)
    assert (check_label(f"{ns}/x", "v") is None) is label
    assert (check_annotation(f"{ns}/x", "v") is None) is other
    assert (check_extended_resource(f"{ns}/x", "1") is None) is other
    assert (check_taint(f"{ns}/x", "v", "NoSchedule", on) is None) is other


def test_deny_and_extra_label_ns_apply_to_labels_only() -> None:
    p = Policy.build(
        deny_label_ns=["*.vendor.io", "bad.org"],
        extra_label_ns=["node.kubernetes.io", "x.vendor.io"],
        enable_taints=True,
    )
    assert check_label("a.vendor.io/x", "v", p) is not None
    assert check_label("x.vendor.io/x", "v", p) is None  # re-allowed
    assert check_label("bad.org/x", "v", p) is not None
    assert check_label("node.kubernetes.io/x", "v", p) is None
    assert check_annotation("a.vendor.io/x", "v", p) is None
    assert check_extended_resource("bad.org/x", "1", p) is None
    assert check_annotation("node.kubernetes.io/x", "v", p) is not None


def test_deny_everything_then_allow_one() -> None:
    p = Policy.build(deny_label_ns=["*"], extra_label_ns=["example.com"])
    assert check_label("example.com/x", "v", p) is None
    assert check_label("other.com/x", "v", p) is not None
    assert check_label(NS + "x", "v", p) is not None


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("4", True),
        ("100m", True),
        ("8Gi", True),
        ("1e3", True),
        ("lots", False),
        ("", False),
        ("1.2.3", False),
    ],
)
def test_extended_resource_values_are_quantities(value: str, ok: bool) -> None:
    pub = publish(labels={}, extended_resources={"vendor.io/r": value}, features=feats())
    assert ("vendor.io/r" in pub.extended_resources) is ok
    if not ok:
        assert "not a valid quantity" in pub.rejected["extendedResources"]["vendor.io/r"]


def test_taints_need_enable_taints_and_are_checked() -> None:
    taints = [
        (NS + "ok", "true", "NoSchedule"),
        (NS + "noval", "", "NoExecute"),
        ("unprefixed", "", "NoSchedule"),
        ("kubernetes.io/x", "", "NoSchedule"),
        (NS + "noeffect", "", ""),
        (NS + "badeffect", "", "Sometimes"),
        (NS + "ok", "true", "NoSchedule"),  # duplicate
    ]
    off = publish(labels={}, taints=taints, features=feats())
    assert off.taints == ()
    assert off.rejected["taints"] == dict.fromkeys(
        [f"{NS}ok=true:NoSchedule", f"{NS}noval:NoExecute", "unprefixed:NoSchedule", "kubernetes.io/x:NoSchedule",
         f"{NS}noeffect:", f"{NS}badeffect:Sometimes"],
        "taints are disabled (enable with --enable-taints)",
    )  # fmt: skip
    on = publish(labels={}, taints=taints, features=feats(), policy=Policy.build(enable_taints=True))
    assert on.taints == (Taint(NS + "ok", "true", "NoSchedule"), Taint(NS + "noval", "", "NoExecute"))
    r = on.rejected["taints"]
    assert r["unprefixed:NoSchedule"] == "unprefixed keys are not allowed"
    assert "not allowed" in r["kubernetes.io/x:NoSchedule"]
    assert r[NS + "noeffect:"] == "empty taint effect"
    assert "invalid taint effect" in r[NS + "badeffect:Sometimes"]


def test_a_taint_prints_as_kubectl_prints_it() -> None:
    assert str(Taint("vendor.io/a", "yes", "NoSchedule")) == "vendor.io/a=yes:NoSchedule"
    assert str(Taint("vendor.io/a", "", "NoExecute")) == "vendor.io/a:NoExecute"


def test_whitelist_and_label_values() -> None:
    pub = publish(
        labels={"cpu-x": "1", "other": "1", "long": "x" * 64},
        features=feats(),
        policy=Policy.build(label_whitelist="^cpu-|^long"),
    )
    assert pub.labels == {NS + "cpu-x": "1"}
    assert "whitelist" in pub.rejected["labels"][NS + "other"]
    assert "63" in pub.rejected["labels"][NS + "long"]


def test_annotation_value_limit() -> None:
    assert check_annotation(NS + "a", "x" * 1024) is None
    assert "too long" in (check_annotation(NS + "a", "x" * 1025) or "")


def test_publish_rule_output(h: SimpleNamespace) -> None:
    from nfd.rules import evaluate

    rs = h.one_rule({"labels": {"v": "@rule.matched.w"}, "vars": {"w": "from-var"}})
    rs2 = h.one_rule({"labels": {"w2": "@rule.matched.w"}}, name="second")
    out = evaluate([*rs, *rs2], h.base())
    pub = decide(labels={}, rules=out, features=h.base())
    # The first rule's own vars are not visible to its own dynamic label at rule time,
    # but the master resolves dynamic values after all rules ran.
    assert pub.labels == {NS + "v": "from-var", NS + "w2": "from-var"}
