"""Property tests of the rules engine's input: random templates, random rule documents
of NodeFeatureRule's shape, and rule files as ``nfd rules test`` reads them. Nothing
raises but the engine's own error types, and evaluation reports a bad rule as that
rule's error, never as an internal one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nfd.rules import evaluate, lint_rulesets, load_rulesets
from nfd.rules.model import RuleParseError, parse_rule
from nfd.rules.template import FUNCTIONS, Template, TemplateError
from tests.fuzzing import dump, junk, mutated, one_line_naming, raw_bytes

from .conftest import base_features

DATA: dict[str, Any] = {
    "cpu": {"cpuid": [{"Name": "AVX"}], "model": [{"Name": "family", "Value": "6"}]},
    "pci": {"device": [{"vendor": "8086", "class": "0300"}, {"vendor": "10de"}]},
    "l": [1, "a", None, 2.5],
    "m": {"a": "b", "c": ""},
    "s": "text",
    "n": 3,
}

# Pieces of Go templates: delimiters, keywords, every function, fields and variables,
# literals (small and huge numbers, strings with printf verbs and escapes).
TEMPLATE_TOKENS = (
    "{{", "}}", "{{- ", " -}}", "{{/* c */}}", "/*", "*/", " ", "\n", "x=", "=",
    "range ", "if ", "else", "else if ", "end", "with ", "break", "continue", "define ", "template ",
    "$", "$x", "$x := ", "$x = ", "$i, $e := ", ".", ".cpu.cpuid", ".pci.device", ".l", ".m", ".m.a",
    ".s", ".n", ".Name", ".Value", ".missing", "(", ")", "|", ",", "nil", "true", "false",
    "0", "1", "-1", "3", "2.5", "1e308", "99999999999", "9223372036854775807", "1" * 50, "0x1F",
    "'a'", '"a"', '"%d"', '"%s=%v"', '"%99999999999d"', '"%.3f"', '"%c"', '"%q"', '"a{99999999999}"',
    '"(["', '"\\n"', '"\\x"', "`raw`", "`", '"',
    *(f"{name} " for name in sorted(FUNCTIONS)),
)  # fmt: skip

templates = st.one_of(
    st.lists(st.sampled_from(TEMPLATE_TOKENS), max_size=25).map("".join),
    # Well-formed actions around random pipelines: these reach execution more often.
    st.lists(
        st.lists(st.sampled_from(TEMPLATE_TOKENS[24:]), min_size=1, max_size=6).map(
            lambda ts: "{{ " + " ".join(t.strip() for t in ts) + " }}"
        ),
        max_size=4,
    ).map("".join),
    st.text(max_size=40),
)


@given(src=templates, data=st.one_of(st.just(DATA), junk))
def test_a_template_renders_or_raises_template_error(src: str, data: Any) -> None:
    t = Template(src)
    for run in (t.render, t.expand_map):
        try:
            out = run(data)
        except TemplateError as e:
            assert "\n" not in str(e).strip("\n") or "missing value" in str(e), str(e)
            continue
        assert isinstance(out, str | dict)


@settings(max_examples=30)
@given(count=st.integers(min_value=-(2**70), max_value=2**70), verb=st.sampled_from("dxXcqsvfeg"))
def test_numbers_at_any_size(count: int, verb: str) -> None:
    src = f'{{{{ printf "%{verb}|%{count % 10**9}{verb}" {count} (mul {count} {count}) }}}}{{{{ range {count} }}}}{{{{ end }}}}'
    try:
        Template(src).render(DATA)
    except TemplateError:
        pass


RULE: dict[str, Any] = {
    "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
    "kind": "NodeFeatureRule",
    "metadata": {"name": "fuzz"},
    "spec": {
        "rules": [
            {
                "name": "r1",
                "labels": {"a": "b", "dyn": "@cpu.model.family"},
                "labelsTemplate": "{{ range .cpu.cpuid }}x-{{ .Name }}=1\n{{ end }}",
                "annotations": {"x.example.com/a": "1"},
                "vars": {"v": "1"},
                "varsTemplate": "w={{ len .pci.device }}",
                "taints": [{"key": "example.com/t", "value": "v", "effect": "NoSchedule"}],
                "extendedResources": {"example.com/r": "@cpu.model.family"},
                "matchFeatures": [
                    {"feature": "cpu.cpuid", "matchExpressions": {"AVX": {"op": "Exists"}}},
                    {"feature": "cpu.model", "matchExpressions": {"family": {"op": "Gt", "value": ["5"]}}},
                    {"feature": "kernel.version", "matchExpressions": {"full": {"op": "GeLe", "value": ["5.1", "7"], "type": "version"}}},
                    {"feature": "pci.device", "matchExpressions": {"vendor": {"op": "InRegexp", "value": ["^80"]}}},
                    {"feature": "cpu.cpuid", "matchName": {"op": "In", "value": ["AVX", "AVX2"]}},
                ],
                "matchAny": [{"matchFeatures": [{"feature": "rule.matched", "matchExpressions": {"a": "b"}}]}],
            },
            {"name": "r2", "labels": {"c": "d"}, "matchFeatures": [{"feature": "rule.matched", "matchExpressions": {"a": {"op": "IsTrue"}}}]},
        ]
    },
}  # fmt: skip


def check_output(docs: list[Any]) -> None:
    rulesets, errors = load_rulesets(docs)
    for e in errors:
        assert "\n" not in str(e), str(e)
    lint_rulesets(rulesets)
    out = evaluate(rulesets, base_features(), explain=True)
    for e in out.errors:
        assert not e.reason.startswith("internal error"), str(e)


@given(doc=mutated(RULE))
def test_a_rule_document_of_the_right_shape_with_bad_values(doc: Any) -> None:
    check_output([doc])


@given(raw=mutated(RULE["spec"]["rules"][0]))
def test_one_rule_parses_or_raises_rule_parse_error(raw: Any) -> None:
    try:
        parse_rule(raw, "spec.rules[0]")
    except RuleParseError as e:
        assert str(e).startswith("spec.rules[0]") and "\n" not in str(e), str(e)


RULES_TEST = [sys.executable, "-m", "nfd", "rules", "test", "--features", os.devnull]


def nfd_rules_test(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RULES_TEST, "--rules", str(path)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "NFD_DEBUG": ""},
    )  # fmt: skip


@given(data=raw_bytes)
def test_a_rule_file_of_any_bytes(tmp_path: Path, data: bytes) -> None:
    from nfd.yamlfile import YamlFileError, load_all

    path = tmp_path / "rules.yaml"
    path.write_bytes(data)
    try:
        docs = load_all(str(path))
    except YamlFileError as e:
        one_line_naming(str(e), str(path))
        return
    check_output(docs)


@pytest.mark.parametrize(
    "text",
    [
        "spec: {rules: [{name: a, labels: {a: 2001-13-45}}]}\n",
        "kind: NodeFeatureRule\n\x00\n",
        "a: !!timestamp x\n",
    ],
)
def test_nfd_rules_test_says_a_bad_file_in_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    p = nfd_rules_test(path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"nfd rules: error: --rules {path}: "), lines[0]
    one_line_naming(lines[0], str(path))


@pytest.mark.parametrize(
    ("rule", "needle"),
    [
        ({"name": "t", "labelsTemplate": '{{ repeat 99999999999 "x" }}'}, "t: failed to expand template"),
        ({"name": "t", "labelsTemplate": "{{ range 99999999999 }}{{ end }}"}, "t: failed to expand template"),
        ({"name": "r", "matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"A": {"op": "InRegexp", "value": ["a{99999999999}"]}}}]}, "fuzz/r: matchFeatures[0].matchExpressions.A: 'value' must only contain valid regexps"),
        ({"name": "n", "labels": {"a": 1}}, "n: spec.rules[0].labels.a: expected a string"),
    ],
)  # fmt: skip
def test_nfd_rules_test_names_the_file_and_rule(tmp_path: Path, rule: dict[str, Any], needle: str) -> None:
    """A bad rule costs that rule: a warning naming the file and rule, exit 0 (1 with
    --strict)."""
    path = tmp_path / "rules.yaml"
    features = tmp_path / "features.json"
    features.write_text('{"flags": {"cpu.cpuid": {"elements": {"A": {}}}}}')
    matching = [{"feature": "cpu.cpuid", "matchExpressions": {"A": {"op": "Exists"}}}]
    doc = {**RULE, "spec": {"rules": [{"matchFeatures": matching, **rule}]}}
    path.write_text(dump(doc))
    for strict, code in (([], 0), (["--strict"], 1)):
        p = subprocess.run(
            [sys.executable, "-m", "nfd", "rules", "test", "--features", str(features), "--rules", str(path), *strict],
            capture_output=True, text=True, timeout=60, env={**os.environ, "NFD_DEBUG": ""},
        )  # fmt: skip
        assert p.returncode == code and "Traceback" not in p.stderr and "internal error" not in p.stderr, (
            p.stderr
        )
        (line,) = [x for x in p.stderr.splitlines() if needle in x]
        assert str(path) in line and "fuzz/" in line, line
