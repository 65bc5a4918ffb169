"""Rule semantics: how matchFeatures and matchAny combine, what templates see,
back-references, vars, ordering and failing rules."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nfd.features import Features
from nfd.rules import load_rulesets


def obj(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": name},
        "spec": {"rules": list(rules)},
    }


KMOD = {"feature": "kernel.loadedmodule", "matchExpressions": {"veth": {"op": "Exists"}}}
NOKMOD = {"feature": "kernel.loadedmodule", "matchExpressions": {"nosuch": {"op": "Exists"}}}
BAD = {"feature": "kernel.version", "matchExpressions": {"major": {"op": "Bogus"}}}


def run(h: SimpleNamespace, *rules: dict[str, Any], features: Features | None = None) -> Any:
    rulesets, errors = load_rulesets([obj("o", *rules)])
    assert errors == []
    return h.run(rulesets, features or h.base())


def test_match_features_is_and(h: SimpleNamespace) -> None:
    out = run(h, {"name": "and", "labels": {"a": "1"}, "matchFeatures": [KMOD, NOKMOD]})
    assert out.labels == {}
    out = run(h, {"name": "and", "labels": {"a": "1"}, "matchFeatures": [KMOD, KMOD]})
    assert out.labels == {"a": "1"}


def test_match_any_is_or_and_combines_with_match_features(h: SimpleNamespace) -> None:
    any_ok = [{"matchFeatures": [NOKMOD]}, {"matchFeatures": [KMOD]}]
    assert run(h, {"name": "r", "labels": {"a": "1"}, "matchAny": any_ok}).labels == {"a": "1"}
    assert run(h, {"name": "r", "labels": {"a": "1"}, "matchAny": [{"matchFeatures": [NOKMOD]}]}).labels == {}
    # both must hold
    assert (
        run(h, {"name": "r", "labels": {"a": "1"}, "matchAny": any_ok, "matchFeatures": [NOKMOD]}).labels
        == {}
    )
    assert run(
        h, {"name": "r", "labels": {"a": "1"}, "matchAny": any_ok, "matchFeatures": [KMOD]}
    ).labels == {"a": "1"}


def test_a_rule_without_matchers_always_matches(h: SimpleNamespace) -> None:
    assert run(h, {"name": "static", "labels": {"a": "1"}, "matchFeatures": None}).labels == {"a": "1"}


def test_missing_feature_is_no_match_and_its_expressions_are_never_evaluated(h: SimpleNamespace) -> None:
    term = {"feature": "nosuch.feature", "matchExpressions": {"x": {"op": "Bogus"}}}
    out = run(h, {"name": "r", "labels": {"a": "1"}, "matchFeatures": [term]})
    assert out.labels == {} and out.errors == []


def test_first_matching_alternative_is_enough_without_templates(h: SimpleNamespace) -> None:
    # Upstream stops at the first match when there is no template: the bad alternative
    # after it is never evaluated.
    out = run(
        h,
        {
            "name": "r",
            "labels": {"a": "1"},
            "matchAny": [{"matchFeatures": [KMOD]}, {"matchFeatures": [BAD]}],
        },
    )
    assert out.labels == {"a": "1"} and out.errors == []
    # With a template every alternative is evaluated, so the bad one fails the rule.
    out = run(
        h,
        {
            "name": "r",
            "labelsTemplate": "x=y",
            "matchAny": [{"matchFeatures": [KMOD]}, {"matchFeatures": [BAD]}],
        },
    )
    assert out.labels == {} and "invalid Op 'Bogus'" in out.errors[0].reason


def test_each_matched_alternative_feeds_the_template(h: SimpleNamespace) -> None:
    tmpl = "{{ range .kernel.loadedmodule }}mod-{{ .Name }}=true\n{{ end }}"
    alt = [
        {
            "matchFeatures": [
                {"feature": "kernel.loadedmodule", "matchExpressions": {"veth": {"op": "Exists"}}}
            ]
        },
        {
            "matchFeatures": [
                {"feature": "kernel.loadedmodule", "matchExpressions": {"overlay": {"op": "Exists"}}}
            ]
        },
        {"matchFeatures": [NOKMOD]},
    ]
    out = run(h, {"name": "r", "labelsTemplate": tmpl, "matchAny": alt})
    assert out.labels == {"mod-veth": "true", "mod-overlay": "true"}


def test_what_templates_see_for_each_feature_kind(h: SimpleNamespace) -> None:
    tmpl = (
        "{{ range .cpu.cpuid }}flag-{{ .Name }}=x\n{{ end }}"
        "{{ range .kernel.version }}attr-{{ .Name }}={{ .Value }}\n{{ end }}"
        "{{ range .pci.device }}inst-{{ .vendor }}-{{ .device }}=x\n{{ end }}"
    )
    out = run(
        h,
        {
            "name": "r",
            "labelsTemplate": tmpl,
            "matchFeatures": [
                {
                    "feature": "cpu.cpuid",
                    "matchExpressions": {"AVX2": {"op": "Exists"}, "SGX": {"op": "DoesNotExist"}},
                },
                {
                    "feature": "kernel.version",
                    "matchExpressions": {"major": {"op": "Gt", "value": ["5"]}},
                    "matchName": {"op": "In", "value": ["minor"]},
                },
                {"feature": "pci.device", "matchExpressions": {"vendor": {"op": "In", "value": ["8086"]}}},
            ],
        },
    )
    # Flags: the expression keys that matched (DoesNotExist included); attributes:
    # matched expressions then matchName elements; instances: whole matching devices.
    assert out.labels == {
        "flag-AVX2": "x",
        "flag-SGX": "x",
        "attr-major": "6",
        "attr-minor": "8",
        "inst-8086-1572": "x",
    }


def test_match_name_elements_are_sorted_and_carry_values(h: SimpleNamespace) -> None:
    tmpl = "{{ range .kernel.config }}{{ .Name }}={{ .Value }}\n{{ end }}"
    out = run(
        h,
        {
            "name": "r",
            "labelsTemplate": tmpl,
            "matchFeatures": [{"feature": "kernel.config", "matchName": {"op": "Exists"}}],
        },
    )
    assert list(out.labels) == ["LSM", "PREEMPT", "X86"]


def test_feature_names_are_case_insensitive_but_template_keys_keep_the_case(h: SimpleNamespace) -> None:
    # Upstream looks features up lower-cased but keys the template data as written:
    # "system.osRelease" matches, and ".system.osrelease" is then a missing key.
    term = {"feature": "system.osRelease", "matchExpressions": {"ID": {"op": "Exists"}}}
    assert run(h, {"name": "r", "labels": {"a": "1"}, "matchFeatures": [term]}).labels == {"a": "1"}
    out = run(
        h,
        {
            "name": "r",
            "labelsTemplate": "{{ range .system.osrelease }}{{ .Name }}=1{{ end }}",
            "matchFeatures": [term],
        },
    )
    assert out.labels == {} and 'no entry for key "osrelease"' in out.errors[0].reason
    out = run(
        h,
        {
            "name": "r",
            "labelsTemplate": "{{ range .system.osRelease }}{{ .Name }}=1{{ end }}",
            "matchFeatures": [term],
        },
    )
    assert out.labels == {"ID": "1"}


def test_static_labels_and_vars_override_templates(h: SimpleNamespace) -> None:
    out = run(
        h,
        {
            "name": "r",
            "labelsTemplate": "a=tmpl\nb=tmpl",
            "labels": {"a": "static"},
            "varsTemplate": "v=tmpl\nw=tmpl",
            "vars": {"v": "static"},
            "matchFeatures": [KMOD],
        },
    )
    assert out.labels == {"a": "static", "b": "tmpl"}
    assert out.vars == {"v": "static", "w": "tmpl"}


def test_templates_run_only_on_matched_features(h: SimpleNamespace) -> None:
    # As upstream: a rule without matchers matches, but has no matched features to
    # expand its template with, so the template is not run at all.
    out = run(h, {"name": "r", "labelsTemplate": "a=tmpl\n{{ .nope }}", "labels": {"s": "1"}})
    assert out.labels == {"s": "1"} and out.errors == []


def test_back_references_see_earlier_labels_and_vars(h: SimpleNamespace) -> None:
    out = run(
        h,
        {"name": "one", "labels": {"kernel-feature": "true"}, "matchFeatures": [KMOD]},
        {"name": "two", "vars": {"nolabel-feature": "true"}, "varsTemplate": "tv=5", "matchFeatures": [KMOD]},
        {"name": "never", "labels": {"never": "true"}, "matchFeatures": [NOKMOD]},
        {
            "name": "high",
            "labels": {"high-level": "true"},
            "labelsTemplate": "{{ range .rule.matched }}seen-{{ .Name }}={{ .Value }}\n{{ end }}",
            "matchFeatures": [
                {
                    "feature": "rule.matched",
                    "matchExpressions": {
                        "kernel-feature": {"op": "IsTrue"},
                        "nolabel-feature": {"op": "IsTrue"},
                        "tv": {"op": "Gt", "value": ["4"]},
                        "never": {"op": "DoesNotExist"},
                    },
                }
            ],
        },
    )
    assert out.labels["high-level"] == "true"
    assert out.labels["seen-tv"] == "5" and out.labels["seen-kernel-feature"] == "true"
    assert out.vars == {"nolabel-feature": "true", "tv": "5"}
    assert out.matched["high-level"] == "true"


def test_a_later_rule_cannot_see_a_later_rule(h: SimpleNamespace) -> None:
    out = run(
        h,
        {
            "name": "first",
            "labels": {"x": "1"},
            "matchFeatures": [{"feature": "rule.matched", "matchExpressions": {"y": {"op": "Exists"}}}],
        },
        {"name": "second", "labels": {"y": "1"}},
    )
    assert out.labels == {"y": "1"}


def test_failing_rule_is_reported_and_later_rules_still_apply(h: SimpleNamespace) -> None:
    out = run(
        h,
        {"name": "ok-before", "labels": {"before": "1"}},
        {"name": "broken", "labels": {"broken": "1"}, "matchFeatures": [BAD]},
        {"name": "bad-template", "labelsTemplate": "{{ .nope }}", "matchFeatures": [KMOD]},
        {
            "name": "ok-after",
            "labels": {"after": "1"},
            "matchFeatures": [
                {"feature": "rule.matched", "matchExpressions": {"broken": {"op": "DoesNotExist"}}}
            ],
        },
    )
    assert out.labels == {"before": "1", "after": "1"}
    assert [(e.object, e.rule) for e in out.errors] == [("o", "broken"), ("o", "bad-template")]
    assert "invalid Op" in out.errors[0].reason
    assert "map has no entry" in out.errors[1].reason


def test_objects_run_in_name_order_rules_in_file_order(h: SimpleNamespace) -> None:
    docs = [
        obj(
            "b-second",
            {
                "name": "uses-a",
                "labels": {"from-b": "1"},
                "matchFeatures": [
                    {"feature": "rule.matched", "matchExpressions": {"from-a": {"op": "Exists"}}}
                ],
            },
        ),
        obj(
            "a-first",
            {"name": "r1", "labels": {"from-a": "1", "shared": "a"}},
            {"name": "r2", "labels": {"shared": "a2"}},
        ),
        obj("c-third", {"name": "r", "labels": {"shared": "c"}}),
    ]
    rulesets, errors = load_rulesets(docs)
    assert errors == []
    assert [r.name for r in rulesets] == ["a-first", "b-second", "c-third"]
    out = h.run(rulesets, h.base())
    assert out.labels == {"from-a": "1", "shared": "c", "from-b": "1"}


def test_prefixed_and_unprefixed_spellings_merge_like_upstream(h: SimpleNamespace) -> None:
    out = run(
        h,
        {"name": "r1", "labels": {"x": "unprefixed", "feature.node.kubernetes.io/x": "prefixed-wins"}},
        {"name": "r2", "labels": {"feature.node.kubernetes.io/y": "first"}},
        {"name": "r3", "labels": {"y": "later-rule-wins"}},
    )
    assert out.labels == {"feature.node.kubernetes.io/x": "prefixed-wins", "y": "later-rule-wins"}


def test_empty_expression_set_matches_when_the_feature_exists(h: SimpleNamespace) -> None:
    term = {"feature": "cpu.cpuid", "matchExpressions": {}}
    assert run(h, {"name": "r", "vars": {"v": "1"}, "matchFeatures": [term]}).vars == {"v": "1"}
    empty = Features()
    empty.set_instances("pci.device", [])
    out = run(
        h,
        {
            "name": "r",
            "labels": {"a": "1"},
            "matchFeatures": [{"feature": "pci.device", "matchExpressions": {}}],
        },
        features=empty,
    )
    assert out.labels == {}


def test_taints_annotations_and_extended_resources_are_collected(h: SimpleNamespace) -> None:
    out = run(
        h,
        {
            "name": "r",
            "annotations": {"a": "1"},
            "extendedResources": {"vendor.io/r": "@kernel.version.major"},
            "taints": [
                {"key": "feature.node.kubernetes.io/t", "value": "v", "effect": "NoSchedule"},
                {"key": "feature.node.kubernetes.io/u", "effect": "NoExecute"},
            ],
        },
    )
    assert out.annotations == {"a": "1"}
    assert out.extended_resources == {"vendor.io/r": "@kernel.version.major"}  # resolved by the policy
    assert [(t.key, t.value, t.effect) for t in out.taints] == [
        ("feature.node.kubernetes.io/t", "v", "NoSchedule"),
        ("feature.node.kubernetes.io/u", "", "NoExecute"),
    ]


def test_invalid_rules_are_reported_at_load_with_object_and_rule(h: SimpleNamespace) -> None:
    docs = [
        obj(
            "o",
            {"name": "good", "labels": {"a": "1"}},
            {"name": "bad-labels", "labels": ["x"]},
            {"name": "bad-terms", "matchFeatures": "cpu"},
            7,
        ),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "skipped"}},
        {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule", "metadata": {}},
        {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeatureRule",
            "metadata": {"name": "x"},
            "spec": {"rules": {}},
        },
    ]
    rulesets, errors = load_rulesets(docs)
    assert [r.name for r in rulesets] == ["o"]
    assert [r.name for r in rulesets[0].rules] == ["good"]
    reasons = {(e.object, e.rule): e.reason for e in errors}
    assert "labels" in reasons[("o", "bad-labels")]
    assert "matchFeatures" in reasons[("o", "bad-terms")]
    assert ("o", "#3") in reasons
    assert any("metadata.name" in e.reason for e in errors)
    assert "spec.rules" in reasons[("x", "")]
    assert str(errors[0]).startswith("o/bad-labels: ")


def test_unknown_keys_are_pruned_as_by_the_api_server(h: SimpleNamespace) -> None:
    docs = [
        obj(
            "o",
            {
                "name": "r",
                "labels": {"a": "1"},
                "unknownField": 1,
                "matchFeatures": [{"pci.device": {"vendor": "0fff"}}],
            },
        )
    ]
    rulesets, errors = load_rulesets(docs)
    assert errors == []
    # The term lost its only key: an empty feature name never matches.
    assert h.run(rulesets, h.base()).labels == {}


def test_list_objects_are_flattened(h: SimpleNamespace) -> None:
    rulesets, errors = load_rulesets(
        [{"apiVersion": "v1", "kind": "List", "items": [obj("a", {"name": "r"}), obj("b", {"name": "r"})]}]
    )
    assert [r.name for r in rulesets] == ["a", "b"] and errors == []


def test_explain_traces(h: SimpleNamespace) -> None:
    rulesets, _ = load_rulesets(
        [
            obj(
                "o",
                {"name": "hit", "matchFeatures": [KMOD]},
                {
                    "name": "miss-value",
                    "matchFeatures": [
                        {
                            "feature": "kernel.version",
                            "matchExpressions": {"major": {"op": "In", "value": ["5"]}},
                        }
                    ],
                },
                {"name": "miss-flag", "matchFeatures": [KMOD, NOKMOD]},
                {
                    "name": "miss-inst",
                    "matchFeatures": [
                        {
                            "feature": "pci.device",
                            "matchExpressions": {"vendor": {"op": "In", "value": ["10de"]}},
                        }
                    ],
                },
                {
                    "name": "miss-feature",
                    "matchFeatures": [
                        {"feature": "cpu.security", "matchExpressions": {"sgx.enabled": {"op": "IsTrue"}}}
                    ],
                },
                {"name": "broken", "matchFeatures": [BAD]},
            )
        ]
    )
    from nfd.rules import evaluate

    traces = {t.rule: t for t in evaluate(rulesets, h.base(), explain=True).traces}
    assert traces["hit"].matched
    assert traces["miss-value"].reason == "kernel.version: major In ['5']: saw '6'"
    assert traces["miss-flag"].reason == "kernel.loadedmodule: nosuch Exists: saw absent"
    assert "first instance has vendor='8086', want In ['10de']" in traces["miss-inst"].reason
    assert traces["miss-feature"].reason == "feature 'cpu.security' is not present on this node"
    assert traces["broken"].failed and "invalid Op" in traces["broken"].reason


def test_an_unexpected_exception_is_a_rule_error_not_a_crash(
    h: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nfd.rules as rules

    real = rules.execute

    def flaky(rule: Any, view: Any, *, explain: bool = False) -> Any:
        if rule.name == "boom":
            raise RuntimeError("bug")
        return real(rule, view, explain=explain)

    monkeypatch.setattr(rules, "execute", flaky)
    out = run(h, {"name": "boom", "labels": {"a": "1"}}, {"name": "fine", "labels": {"b": "1"}})
    assert out.labels == {"b": "1"}
    assert out.errors[0].rule == "boom" and out.errors[0].reason == "internal error: RuntimeError: bug"


def test_lint_finds_what_fails_wherever_evaluation_gets(h: SimpleNamespace) -> None:
    from nfd.rules import lint_rulesets

    docs = [
        obj(
            "o",
            {
                "name": "typos",
                "labelsTemplate": '{{ env "X" }}',
                "taints": [{"key": "feature.node.kubernetes.io/t", "effect": "Never"}],
                "matchFeatures": [
                    {
                        "feature": "system.osrelease",
                        "matchExpressions": {"NAME": {"op": "InRegexp", "values": ["^x"]}},
                    },
                    {
                        "feature": "kernel.version",
                        "matchExpressions": {
                            "major": {"op": "GtLt", "value": ["9", "2"]},
                            "minor": {"op": "Gt", "value": ["x"]},
                        },
                    },
                    {"feature": "cpuid", "matchName": {"op": "Lt", "value": ["1.2"], "type": "version"}},
                ],
            },
            {"name": "clean", "labels": {"a": "1"}, "matchFeatures": [KMOD]},
        )
    ]
    rulesets, errors = load_rulesets(docs)
    assert errors == []
    problems = [e.reason for e in lint_rulesets(rulesets)]
    assert all(e.rule == "typos" for e in lint_rulesets(rulesets))
    assert problems == [
        "matchFeatures[0].matchExpressions.NAME: unknown key 'values' ignored",
        "matchFeatures[0].matchExpressions.NAME: 'value' must be non-empty for Op 'InRegexp'",
        "matchFeatures[1].matchExpressions.major: value[0] must be less than value[1] for Op 'GtLt' (have ['9', '2'])",
        "matchFeatures[1].matchExpressions.minor: every value of Op 'Gt' must be an integer (have ['x'])",
        "matchFeatures[2]: feature name 'cpuid' is not <domain>.<feature>: it never matches",
        'labelsTemplate: invalid template: function "env" not defined',
        "taints[0]: effect 'Never' is not NoSchedule, PreferNoSchedule or NoExecute",
    ]
