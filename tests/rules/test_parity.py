"""Cases where upstream v0.19's engine behaves in a way that is easy to get wrong; each
says what upstream's code does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from nfd.features import Features
from nfd.rules import evaluate, load_rulesets


def nfr(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": name},
        "spec": {"rules": list(rules)},
    }


def run(docs: list[dict[str, Any]], features: Features | None = None) -> dict[str, str]:
    sets, errors = load_rulesets(docs)
    assert errors == []
    return evaluate(sets, features or Features()).labels


BARE_BACKREF = {"name": "after", "labels": {"after": "true"}, "matchFeatures": [{"feature": "rule.matched"}]}


def test_rule_matched_exists_after_a_rule_that_did_not_match() -> None:
    # Upstream feeds back every evaluated rule's (empty) output: rule.matched exists.
    miss = {"name": "miss", "labels": {"x": "1"}, "matchFeatures": [{"feature": "no.such"}]}
    assert run([nfr("a", miss, BARE_BACKREF)]) == {"after": "true"}


def test_rule_matched_does_not_exist_after_only_a_failing_rule() -> None:
    # A rule that errors is skipped before the feedback: nothing exists yet.
    bad = {
        "name": "bad",
        "labels": {"x": "1"},
        "matchFeatures": [{"feature": "a.attr", "matchExpressions": {"k": {"op": "Gt", "value": ["nan"]}}}],
    }
    f = Features()
    f.set_attributes("a.attr", {"k": "1"})
    sets, _ = load_rulesets([nfr("a", bad, BARE_BACKREF)])
    out = evaluate(sets, f)
    assert [e.rule for e in out.errors] == ["bad"]
    assert out.labels == {}


def test_rule_matched_before_any_rule_and_after_the_first_success() -> None:
    assert run([nfr("a", BARE_BACKREF)]) == {}
    hit = {"name": "hit", "labels": {"first": "yes"}}
    check = {
        "name": "check",
        "labels": {"seen": "true"},
        "matchFeatures": [
            {"feature": "rule.matched", "matchExpressions": {"first": {"op": "In", "value": ["yes"]}}}
        ],
    }
    assert run([nfr("a", hit, check)]) == {"first": "yes", "seen": "true"}


def test_rule_matched_after_an_unmatched_rule_is_empty_not_null() -> None:
    # An empty element set: matchExpressions {} and DoesNotExist both match it.
    miss = {"name": "miss", "matchFeatures": [{"feature": "no.such"}]}
    empty = {
        "name": "e",
        "labels": {"e": "1"},
        "matchFeatures": [{"feature": "rule.matched", "matchExpressions": {}}],
    }
    dne = {
        "name": "d",
        "labels": {"d": "1"},
        "matchFeatures": [{"feature": "rule.matched", "matchExpressions": {"zz": {"op": "DoesNotExist"}}}],
    }
    assert run([nfr("a", miss, empty, dne)]) == {"e": "1", "d": "1"}


def test_same_object_name_twice_the_later_replaces_the_earlier() -> None:
    first = nfr("same", {"name": "one", "labels": {"one": "1"}})
    second = nfr("same", {"name": "two", "labels": {"two": "2"}})
    other = nfr("other", {"name": "o", "labels": {"o": "1"}})
    sets, _ = load_rulesets([first, other, second])
    assert [(s.name, [r.name for r in s.rules]) for s in sets] == [("other", ["o"]), ("same", ["two"])]
    assert run([first, other, second]) == {"o": "1", "two": "2"}


def test_a_replaced_objects_problems_go_with_it() -> None:
    bad = nfr("same", {"name": "broken", "matchFeatures": "nope"})
    good = nfr("same", {"name": "fine", "labels": {"ok": "1"}})
    sets, errors = load_rulesets([bad, good])
    assert errors == [] and [r.name for r in sets[0].rules] == ["fine"]


NULL_AND_EMPTY = {
    "flags": {"f.empty": {"elements": {}}, "f.null": {"elements": None}, "f.missing": {}},
    "attributes": {"a.empty": {"elements": {}}, "a.null": {"elements": None}},
    "instances": {"i.empty": {"elements": []}, "i.null": {"elements": None}},
}


@pytest.mark.parametrize(
    ("feature", "bare", "empty_set", "does_not_exist"),
    [
        ("f.empty", True, True, True),
        ("f.null", True, False, False),
        ("f.missing", True, False, False),  # no elements key: null to Go's decoder
        ("a.empty", True, True, True),
        ("a.null", True, False, False),
        ("i.empty", True, False, False),  # instances: only an instance can match
        ("i.null", True, False, False),
        ("x.absent", False, False, False),
    ],
)
def test_bare_term_and_empty_expressions_on_empty_and_null_sets(
    feature: str, bare: bool, empty_set: bool, does_not_exist: bool
) -> None:
    f = Features.from_dict(NULL_AND_EMPTY)
    rules = [
        {"name": "bare", "labels": {"bare": "1"}, "matchFeatures": [{"feature": feature}]},
        {
            "name": "empty",
            "labels": {"empty": "1"},
            "matchFeatures": [{"feature": feature, "matchExpressions": {}}],
        },
        {
            "name": "dne",
            "labels": {"dne": "1"},
            "matchFeatures": [{"feature": feature, "matchExpressions": {"k": {"op": "DoesNotExist"}}}],
        },
    ]
    got = run([nfr("o", *rules)], f)
    assert ("bare" in got, "empty" in got, "dne" in got) == (bare, empty_set, does_not_exist)


def test_null_and_empty_sets_serialise_alike() -> None:
    f = Features.from_dict(NULL_AND_EMPTY)
    assert f.to_dict()["flags"]["f.null"] == {"elements": {}}
    assert f.digest() == Features.from_dict(json.loads(json.dumps(f.to_dict()))).digest()


# -- nfd rules test with a NodeFeature object ------------------------------------------------


def nfd_rules_test(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nfd", "rules", "test", "-o", "json", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


NODEFEATURE = {
    "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
    "kind": "NodeFeature",
    "metadata": {"name": "n1", "labels": {"nfd.node.kubernetes.io/node-name": "n1"}},
    "spec": {
        "features": {"attributes": {"fake.attribute": {"elements": {"attr_1": "true"}}}},
        "labels": {
            "plain": "from-object",
            "e2e.feature.node.kubernetes.io/overridden": "from-object",
            "sub.denied.ns/label": "x",
            "random.unwanted.ns/label": "y",
            "denied.ns/label": "z",
            "vendor.io/allowed": "a",
            "kubernetes.io/builtin-denied": "b",
        },
    },
}


def test_nodefeature_labels_are_qualified_overridden_by_rules_and_filtered(tmp_path: Path) -> None:
    node = tmp_path / "node.yaml"
    node.write_text(yaml.safe_dump(NODEFEATURE))
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        yaml.safe_dump(
            nfr(
                "r",
                {
                    "name": "r",
                    "labels": {"e2e.feature.node.kubernetes.io/overridden": "from-rule", "ruled": "1"},
                    "matchFeatures": [
                        {"feature": "fake.attribute", "matchExpressions": {"attr_1": {"op": "IsTrue"}}}
                    ],
                },
            )
        )
    )
    r = nfd_rules_test(
        "--rules", str(rules), "--features", str(node), "--deny-label-ns", "*.denied.ns,random.unwanted.ns"
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["labels"] == {
        "denied.ns/label": "z",  # the wildcard denies subdomains only
        "e2e.feature.node.kubernetes.io/overridden": "from-rule",
        "feature.node.kubernetes.io/plain": "from-object",
        "feature.node.kubernetes.io/ruled": "1",
        "vendor.io/allowed": "a",
    }
    for gone in ("sub.denied.ns/label", "random.unwanted.ns/label", "kubernetes.io/builtin-denied"):
        assert gone in r.stderr


def test_nodefeature_labels_without_deny_flags(tmp_path: Path) -> None:
    node = tmp_path / "node.json"
    node.write_text(json.dumps(NODEFEATURE))
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(nfr("empty")))
    r = nfd_rules_test("--rules", str(rules), "--features", str(node))
    assert r.returncode == 0, r.stderr
    labels = json.loads(r.stdout)["labels"]
    assert labels["sub.denied.ns/label"] == "x" and labels["random.unwanted.ns/label"] == "y"
    assert "kubernetes.io/builtin-denied" not in labels


def test_a_bad_nodefeature_exits_2_naming_the_file_and_key(tmp_path: Path) -> None:
    node = tmp_path / "node.yaml"
    node.write_text(yaml.safe_dump({**NODEFEATURE, "spec": {"labels": {"a": 1}}}))
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(nfr("empty")))
    r = nfd_rules_test("--rules", str(rules), "--features", str(node))
    assert r.returncode == 2
    assert str(node) in r.stderr and "spec.labels" in r.stderr
    assert "Traceback" not in r.stderr
