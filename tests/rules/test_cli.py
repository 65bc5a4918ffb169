"""``nfd rules test`` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RULES = FIXTURES / "rules"
BASELINE = FIXTURES / "upstream-baseline" / "features.json"


def nfd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nfd", "rules", "test", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def sgx_features(tmp_path: Path) -> Path:
    feats = {
        "flags": {"cpu.cpuid": {"elements": {"SGX": {}, "SGXLC": {}, "AVX": {}}}},
        "attributes": {
            "cpu.security": {"elements": {"sgx.enabled": "true", "sgx.epc": "68719476736"}},
            "kernel.config": {"elements": {"X86_SGX": "y"}},
        },
        "instances": {},
    }
    p = tmp_path / "features.json"
    p.write_text(json.dumps(feats))
    return p


def test_json_output_has_exactly_the_documented_shape(tmp_path: Path) -> None:
    r = nfd(
        "--rules",
        str(RULES / "intel-device-plugins/node-feature-rules.yaml"),
        "--features",
        str(sgx_features(tmp_path)),
        "-o",
        "json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc == {
        "labels": {"intel.feature.node.kubernetes.io/sgx": "true"},
        "annotations": {},
        "extendedResources": {"sgx.intel.com/epc": "68719476736"},
        "taints": [],
        "vars": {},
        "rejected": {},
    }
    assert list(doc) == ["labels", "annotations", "extendedResources", "taints", "vars", "rejected"]


def test_discover_json_is_accepted_and_taints_need_the_flag(tmp_path: Path) -> None:
    features = json.loads(BASELINE.read_text())
    p = tmp_path / "discover.json"
    p.write_text(json.dumps({"labels": {"feature.node.kubernetes.io/x": "1"}, "features": features}))
    rules = tmp_path / "r.yaml"
    rules.write_text(
        """
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: t}
spec:
  rules:
    - name: taint and vars
      vars: {kernel.ok: "yes"}
      labels: {k: "@kernel.version.major"}
      annotations: {note: hello}
      taints:
        - {key: feature.node.kubernetes.io/special, value: "true", effect: NoSchedule}
        - {key: kubernetes.io/denied, effect: NoSchedule}
      matchFeatures:
        - feature: kernel.version
          matchExpressions:
            major: {op: Ge, value: ["6"]}
"""
    )
    r = nfd("--rules", str(rules), "--features", str(p), "-o", "json")
    off = json.loads(r.stdout)
    assert off["taints"] == []
    disabled = "taints are disabled (enable with --enable-taints)"
    assert off["rejected"] == {
        "taints": {
            "feature.node.kubernetes.io/special=true:NoSchedule": disabled,
            "kubernetes.io/denied:NoSchedule": disabled,
        }
    }
    assert f"taint kubernetes.io/denied:NoSchedule left out: {disabled}" in r.stderr
    assert off["labels"] == {"feature.node.kubernetes.io/k": "6"}
    assert off["annotations"] == {"feature.node.kubernetes.io/note": "hello"}
    assert off["vars"] == {"kernel.ok": "yes"}
    r = nfd("--rules", str(rules), "--features", str(p), "-o", "json", "--enable-taints")
    on = json.loads(r.stdout)
    assert on["taints"] == [
        {"key": "feature.node.kubernetes.io/special", "value": "true", "effect": "NoSchedule"}
    ]
    assert (
        "taint kubernetes.io/denied:NoSchedule left out: namespace 'kubernetes.io' is not allowed" in r.stderr
    )


TAINTED = """
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: t}
spec:
  rules:
    - name: taints
      labels: {tainted: "yes"}
      taints:
        - {key: feature.node.kubernetes.io/special, value: "true", effect: NoSchedule}
        - {key: feature.node.kubernetes.io/novalue, effect: NoExecute}
        - {key: kubernetes.io/denied, effect: NoSchedule}
"""


@pytest.mark.parametrize("enable_taints", [False, True])
def test_what_rules_test_reports_is_what_the_master_decides(tmp_path: Path, enable_taints: bool) -> None:
    import yaml

    from nfd.config import WorkerConfig
    from nfd.features import Features
    from nfd.master.decisions.decide import Decider
    from nfd.policy import Policy
    from nfd.rules import load_rulesets

    rules = tmp_path / "r.yaml"
    rules.write_text(TAINTED)
    flags = ["--enable-taints"] if enable_taints else []
    r = nfd("--rules", str(rules), "--features", str(BASELINE), "-o", "json", *flags)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)

    sets, _ = load_rulesets([yaml.safe_load(TAINTED)])
    decider = Decider(
        sources=[], config=WorkerConfig(), policy=Policy.build(enable_taints=enable_taints), rulesets=sets
    )
    master = decider.decide(Features.from_dict(json.loads(BASELINE.read_text())))
    assert got["rejected"] == master.rejected and got["rejected"]["taints"]
    assert got["labels"] == master.labels
    assert got["taints"] == [{"key": t.key, "value": t.value, "effect": t.effect} for t in master.taints]
    for name, reason in master.rejected["taints"].items():
        assert f"taint {name} left out: {reason}" in r.stderr
    if enable_taints:
        text = nfd("--rules", str(rules), "--features", str(BASELINE), *flags).stdout
        assert "  feature.node.kubernetes.io/novalue:NoExecute\n" in text
        assert "  feature.node.kubernetes.io/special=true:NoSchedule\n" in text


def test_policy_flags(tmp_path: Path) -> None:
    args = [
        "--rules",
        str(RULES / "intel-device-plugins/node-feature-rules.yaml"),
        "--features",
        str(sgx_features(tmp_path)),
        "-o",
        "json",
    ]
    denied = nfd(*args, "--deny-label-ns", "*.node.kubernetes.io")
    assert json.loads(denied.stdout)["labels"] == {}
    assert "label intel.feature.node.kubernetes.io/sgx left out" in denied.stderr
    allowed = nfd(
        *args,
        "--deny-label-ns",
        "*.node.kubernetes.io",
        "--extra-label-ns",
        "intel.feature.node.kubernetes.io",
    )
    assert json.loads(allowed.stdout)["labels"] == {"intel.feature.node.kubernetes.io/sgx": "true"}
    wl = nfd(*args, "--label-whitelist", "^gpu")
    assert json.loads(wl.stdout)["labels"] == {}


def test_text_output_and_explain(tmp_path: Path) -> None:
    r = nfd(
        "--rules",
        str(RULES / "intel-device-plugins/node-feature-rules.yaml"),
        "--features",
        str(sgx_features(tmp_path)),
        "--explain",
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "labels:\n  intel.feature.node.kubernetes.io/sgx=true\n" in out
    assert "extended resources:\n  sgx.intel.com/epc=68719476736\n" in out
    assert "  matched  intel-dp-devices/intel.sgx\n" in out
    assert "  no match intel-dp-devices/intel.dlb: feature 'pci.device' is not present on this node\n" in out
    assert "  no match intel-dp-devices/intel.qat: none of the 2 matchAny alternatives matched" in out


def test_explain_says_which_expression_failed_and_what_it_saw(tmp_path: Path) -> None:
    p = sgx_features(tmp_path)
    data = json.loads(p.read_text())
    data["attributes"]["cpu.security"]["elements"]["sgx.enabled"] = "false"
    p.write_text(json.dumps(data))
    r = nfd(
        "--rules",
        str(RULES / "intel-device-plugins/node-feature-rules.yaml"),
        "--features",
        str(p),
        "--explain",
        "-o",
        "json",
    )
    assert json.loads(r.stdout)["labels"] == {}
    # In JSON mode stdout stays the document; the explanation goes to stderr.
    assert "no match intel-dp-devices/intel.sgx: cpu.security: sgx.enabled IsTrue: saw 'false'" in r.stderr


def test_bad_rules_are_reported_and_others_still_apply(tmp_path: Path) -> None:
    rules = tmp_path / "r.yaml"
    rules.write_text(
        """
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: mixed}
spec:
  rules:
    - name: broken
      labels: {a: "1"}
      matchFeatures: [{feature: cpu.cpuid, matchExpressions: {SGX: {op: Sometimes}}}]
    - name: bad-shape
      labels: [x]
    - name: fine
      labels: {b: "2"}
"""
    )
    r = nfd("--rules", str(rules), "--features", str(sgx_features(tmp_path)), "-o", "json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["labels"] == {"feature.node.kubernetes.io/b": "2"}
    assert "rule mixed/broken: invalid Op 'Sometimes'" in r.stderr
    assert "rule mixed/bad-shape:" in r.stderr


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing-rules", "--rules {d}/nope.yaml: no such file"),
        ("bad-yaml", "not valid YAML"),
        ("missing-features", "--features {d}/nope.json: no such file"),
        ("bad-json", "--features {d}/f.json: not valid YAML: "),
        ("bad-shape", "expected an object"),
        ("bad-whitelist", "not a valid regex"),
        ("bad-host-root", "no such directory"),
        ("huge-number", "--features {d}/n.json: not valid YAML: a number of more than 4300 digits"),
        ("no-such-date", "--features {d}/d.yaml: not valid YAML: month must be in 1..12"),
        ("bad-tag", "--features {d}/t.yaml: not valid YAML: a value its tag does not allow"),
    ],
)
def test_input_errors_exit_2_with_one_line(tmp_path: Path, setup: str, message: str) -> None:
    good_rules = str(RULES / "upstream/docs-cg-b1.yaml")
    feats = str(sgx_features(tmp_path))
    args = {
        "missing-rules": ["--rules", f"{tmp_path}/nope.yaml", "--features", feats],
        "bad-yaml": ["--rules", str(_write(tmp_path / "b.yaml", "a: [1,\n")), "--features", feats],
        "missing-features": ["--rules", good_rules, "--features", f"{tmp_path}/nope.json"],
        "bad-json": ["--rules", good_rules, "--features", str(_write(tmp_path / "f.json", "{nope"))],
        "bad-shape": [
            "--rules",
            good_rules,
            "--features",
            str(_write(tmp_path / "s.json", '{"flags": {"x": 1}}')),
        ],
        "bad-whitelist": ["--rules", good_rules, "--features", feats, "--label-whitelist", "("],
        "bad-host-root": ["--rules", good_rules, "--local", "--host-root", f"{tmp_path}/nodir"],
        "huge-number": [
            "--rules",
            good_rules,
            "--features",
            str(_write(tmp_path / "n.json", "[" + "1" * 5000 + "]")),
        ],
        "no-such-date": [
            "--rules",
            good_rules,
            "--features",
            str(_write(tmp_path / "d.yaml", "flags: 2001-13-45\n")),
        ],
        "bad-tag": [
            "--rules",
            good_rules,
            "--features",
            str(_write(tmp_path / "t.yaml", "flags: !!bool x\n")),
        ],
    }[setup]
    r = nfd(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert message.format(d=tmp_path) in lines[0]
    assert "Traceback" not in r.stderr


def test_local_discovery_on_a_fixture_host(tmp_path: Path) -> None:
    # An empty host root: discovery finds little, the rules still run.
    (tmp_path / "host").mkdir()
    r = nfd(
        "--rules",
        str(RULES / "upstream/docs-wrapped-cg-b35.yaml"),
        "--local",
        "--host-root",
        str(tmp_path / "host"),
        "-o",
        "json",
    )
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)) == {
        "labels",
        "annotations",
        "extendedResources",
        "taints",
        "vars",
        "rejected",
    }


def _write(p: Path, text: str) -> Path:
    p.write_text(text)
    return p


def test_lint_warnings_for_rules_the_node_never_reaches(tmp_path: Path) -> None:
    r = nfd(
        "--rules",
        str(RULES / "upstream/docs-wrapped-cg-b36.yaml"),
        "--features",
        str(sgx_features(tmp_path)),
        "-o",
        "json",
    )
    assert r.returncode == 0
    assert json.loads(r.stdout)["labels"] == {}
    assert (
        "rule docs-cg-b36/my multi-feature rule: matchFeatures[1].matchExpressions.NAME: unknown key 'values' ignored"
        in r.stderr
    )


def test_nodefeature_objects_are_accepted_as_features(tmp_path: Path) -> None:
    feats = json.loads(sgx_features(tmp_path).read_text())
    p = tmp_path / "nf.json"
    p.write_text(
        json.dumps(
            {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature", "spec": {"features": feats}}
        )
    )
    r = nfd(
        "--rules",
        str(RULES / "intel-device-plugins/node-feature-rules.yaml"),
        "--features",
        str(p),
        "-o",
        "json",
    )
    assert json.loads(r.stdout)["extendedResources"] == {"sgx.intel.com/epc": "68719476736"}


def test_text_output_when_nothing_matches(tmp_path: Path) -> None:
    r = nfd(
        "--rules",
        str(RULES / "upstream/rw-gpu-operator-head.yaml"),
        "--features",
        str(sgx_features(tmp_path)),
    )
    assert r.returncode == 0
    assert r.stdout == "nothing: no rule set anything for this node\n"


BROKEN = """
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: broken}
spec:
  rules:
    - name: bad op
      labels: {a: "1"}
      matchFeatures:
        - feature: kernel.version
          matchExpressions: {major: {op: Frob, value: ["6"]}}
    - name: bad template
      labelsTemplate: "{{ .x "
      matchFeatures:
        - feature: kernel.version
          matchExpressions: {major: {op: Exists}}
    - name: five
      labels: 5
    - labels: {anonymous: "1"}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
"""

GOOD = """
apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata: {name: good}
spec:
  rules:
    - name: ok
      labels: {ok: "1"}
"""


def test_strict_lists_every_problem_with_file_and_rule_and_fails(tmp_path: Path) -> None:
    broken, good = tmp_path / "broken.yaml", tmp_path / "good.yaml"
    broken.write_text(BROKEN)
    good.write_text(GOOD)
    args = ["--rules", str(good), "--rules", str(broken), "--features", str(BASELINE)]
    lenient = nfd(*args)
    assert lenient.returncode == 0
    strict = nfd(*args, "--strict")
    assert strict.returncode == 1
    assert "feature.node.kubernetes.io/ok=1" in strict.stdout  # the output is still there
    errors = [line for line in strict.stderr.splitlines() if ": error: " in line]
    expected = [
        "rule broken/bad op: invalid Op 'Frob'",
        "rule broken/bad template: failed to parse template",
        "rule broken/five: spec.rules[2].labels: expected a mapping of strings",
        "rule broken/spec.rules[3]: name is required",
        "document 2: kind 'Pod'",
    ]
    for needle in expected:
        assert [e for e in errors if f"{broken}: {needle}" in e], (needle, strict.stderr)
    assert len(errors) == len(expected)
    assert not any(str(good) in e for e in errors)
    assert lenient.stderr.count(": warning: ") == len(expected)
    assert nfd("--rules", str(good), "--features", str(BASELINE), "--strict").returncode == 0


def test_a_rule_file_over_the_size_bound_is_refused_by_name(tmp_path: Path) -> None:
    from nfd.yamlfile import RULES_LIMIT

    big = tmp_path / "huge.yaml"
    with big.open("wb") as f:
        f.truncate(RULES_LIMIT + 1)
    r = nfd("--rules", str(big), "--features", str(BASELINE))
    assert r.returncode == 2
    assert (
        r.stderr.strip()
        == f"nfd rules: error: --rules {big}: {RULES_LIMIT + 1} bytes, more than the limit of 8 MiB"
    )


def test_yaml_is_parsed_with_libyaml_where_pyyaml_has_it() -> None:
    import yaml

    from nfd.yamlfile import loader

    assert loader() is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    assert hasattr(yaml, "CSafeLoader")  # the wheel this project installs carries libyaml
