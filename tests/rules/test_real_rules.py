"""Every real rule file loads, and gives what upstream gives on nodes written from real
device facts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from nfd.decision import decide
from nfd.features import Features
from nfd.policy import Policy
from nfd.rules import evaluate, load_rulesets
from nfd.taint import Taint

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
ALL_FILES = sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*.yaml"))
BASELINE = Path(__file__).resolve().parent.parent / "fixtures" / "upstream-baseline"


def test_there_are_real_rule_files() -> None:
    assert len(ALL_FILES) >= 40


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_real_file_loads_without_error(name: str) -> None:
    docs = [d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d is not None]
    rulesets, errors = load_rulesets(docs)
    assert errors == []
    expected = sum(1 for d in docs if d.get("kind") == "NodeFeatureRule")
    assert len(rulesets) == expected
    for rs in rulesets:
        assert rs.rules, rs.name


def publish(rulesets: list, features: Features, **policy: object):  # type: ignore[no-untyped-def,type-arg]
    out = evaluate(rulesets, features)
    return out, decide(labels={}, rules=out, features=features, policy=Policy.build(**policy))  # type: ignore[arg-type]


INTEL_LABELS = {
    "intel.feature.node.kubernetes.io/qat": "true",
    "intel.feature.node.kubernetes.io/dsa": "true",
    "intel.feature.node.kubernetes.io/iaa": "true",
    "intel.feature.node.kubernetes.io/dlb": "true",
    "intel.feature.node.kubernetes.io/gpu": "true",
    "intel.feature.node.kubernetes.io/fpga-arria10": "true",
    "intel.feature.node.kubernetes.io/npu": "true",
}


def test_intel_device_plugin_rules_on_an_accelerator_node(h: SimpleNamespace) -> None:
    rs = h.load_files("intel-device-plugins/node-feature-rules.yaml")
    out, pub = publish(rs, h.intel())
    assert out.errors == []
    assert pub.labels == INTEL_LABELS
    assert pub.extended_resources == {}


def test_intel_rules_need_the_drivers(h: SimpleNamespace) -> None:
    f = h.intel()
    f.flags["kernel.loadedmodule"] -= {"intel_qat", "idxd"}
    f.flags["kernel.enabledmodule"] -= {"i915"}
    f.flags["kernel.loadedmodule"] -= {"i915"}
    _, pub = publish(h.load_files("intel-device-plugins/node-feature-rules.yaml"), f)
    assert set(INTEL_LABELS) - set(pub.labels) == {
        "intel.feature.node.kubernetes.io/qat",
        "intel.feature.node.kubernetes.io/dsa",
        "intel.feature.node.kubernetes.io/iaa",
        "intel.feature.node.kubernetes.io/gpu",
    }


def test_intel_qat_via_vfio_pci_builtin_only(h: SimpleNamespace) -> None:
    # matchAny: vfio_pci loaded, or vfio-pci built in (modules.builtin).
    f = h.intel()
    f.flags["kernel.loadedmodule"].discard("vfio_pci")
    _, pub = publish(h.load_files("intel-device-plugins/node-feature-rules.yaml"), f)
    assert "intel.feature.node.kubernetes.io/qat" in pub.labels
    f.flags["kernel.enabledmodule"].discard("vfio-pci")
    _, pub = publish(h.load_files("intel-device-plugins/node-feature-rules.yaml"), f)
    assert "intel.feature.node.kubernetes.io/qat" not in pub.labels


def test_intel_sgx_gives_the_epc_extended_resource(h: SimpleNamespace) -> None:
    rs = h.load_files("intel-device-plugins/node-feature-rules.yaml")
    _, pub = publish(rs, h.sgx())
    assert pub.labels == {"intel.feature.node.kubernetes.io/sgx": "true"}
    assert pub.extended_resources == {"sgx.intel.com/epc": "68719476736"}
    # Without the kernel's SGX driver the rule does not fire.
    f = h.sgx()
    del f.attributes["kernel.config"]["X86_SGX"]
    _, pub = publish(rs, f)
    assert pub.labels == {} and pub.extended_resources == {}


def test_intel_gpu_platform_labeling(h: SimpleNamespace) -> None:
    rs = h.load_files("intel-device-plugins/platform-labeling-rules.yaml")
    f = h.base()
    f.instances["pci.device"] += [
        {"class": "0380", "vendor": "8086", "device": "56c0"},
        {"class": "0380", "vendor": "8086", "device": "56c0"},
    ]
    out, pub = publish(rs, f)
    assert out.errors == []
    assert pub.labels == {
        "gpu.intel.com/device-id.0380-56c0.present": "true",
        "gpu.intel.com/device-id.0380-56c0.count": "2",
        "gpu.intel.com/device.count": "2",
        "gpu.intel.com/family": "Flex_Series",
        "gpu.intel.com/product": "Flex_170",
    }


def test_intel_gpu_platform_labeling_max_1550_and_arc(h: SimpleNamespace) -> None:
    rs = h.load_files("intel-device-plugins/platform-labeling-rules.yaml")
    f = h.base()
    f.instances["pci.device"] = [
        {"class": "0380", "vendor": "8086", "device": "0bd5"},
        {"class": "0300", "vendor": "8086", "device": "56a0"},
    ]
    _, pub = publish(rs, f)
    assert pub.labels["gpu.intel.com/product"] == "Max_1550"
    assert pub.labels["gpu.intel.com/family"] == "A_Series"  # the later rule wins
    assert pub.labels["gpu.intel.com/device-id.0300-56a0.count"] == "1"
    assert pub.labels["gpu.intel.com/device-id.0380-0bd5.present"] == "true"


def test_both_intel_files_together_and_the_openshift_variant(h: SimpleNamespace) -> None:
    _, pub = publish(h.load_files("upstream/rw-intel-both-files.yaml"), h.intel())
    assert set(INTEL_LABELS) <= set(pub.labels)
    assert pub.labels["gpu.intel.com/product"] == "Flex_170"
    _, pub = publish(h.load_files("upstream/rw-intel-openshift-md.yaml"), h.sgx())
    assert pub.extended_resources == {"sgx.intel.com/epc": "68719476736"}


def test_gpu_operator_rules_on_an_h100_tdx_node(h: SimpleNamespace) -> None:
    rs = h.load_files("upstream/rw-gpu-operator-ba224dc08.yaml")
    out, pub = publish(rs, h.nvidia())
    assert out.errors == []
    assert pub.labels == {
        "feature.node.kubernetes.io/tdx.enabled": "true",
        "nvidia.com/gpu.H100.HBM3": "true",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/cc.capable": "true",  # via rule.matched back-references
        "nvidia.com/gdrcopy.capable": "true",
        "nvidia.com/gds.capable": "true",
        "nvidia.com/peermem.capable": "true",
    }
    assert pub.extended_resources == {"feature.node.kubernetes.io/tdx.total_keys": "63"}


def test_gpu_operator_cc_needs_a_hopper_gpu(h: SimpleNamespace) -> None:
    f = h.nvidia()
    f.instances["pci.device"][-1]["device"] = "20b0"  # A100
    _, pub = publish(
        h.load_files("upstream/rw-gpu-operator-head.yaml", "upstream/rw-gpu-operator-ba224dc08.yaml"), f
    )
    assert "nvidia.com/cc.capable" not in pub.labels
    assert "nvidia.com/gpu.family" not in pub.labels


def test_upstream_e2e_rules_on_the_fake_source(h: SimpleNamespace) -> None:
    # The expectations of upstream's end-to-end tests for these objects.
    rs = h.load_files("upstream/e2e-nfr-1-2-3-4-5.yaml")
    out, pub = publish(rs, h.fake(), enable_taints=True)
    assert out.errors == []
    ns = "feature.node.kubernetes.io/"
    assert pub.labels == {
        ns + "e2e-flag-test-1": "true",
        ns + "e2e-flag-test-2": "true",
        ns + "e2e-attribute-test-1": "true",
        ns + "e2e-attribute-test-2": "true",
        ns + "e2e-instance-test-1": "true",
        ns + "e2e-instance-test-2": "true",
        ns + "e2e-matchany-test-1": "true",
        ns + "dynamic-label": "true",
        ns + "e2e-template-test-1-instance_1": "found",
        ns + "e2e-template-test-1-instance_2": "found",
        ns + "e2e-template-test-2-attr_2": "false",
        ns + "e2e-template-test-2-attr_3": "10",
    }
    assert pub.taints == (
        Taint(ns + "fake-special-node", "exists", "PreferNoSchedule"),
        Taint(ns + "fake-dedicated-node", "true", "NoExecute"),
        Taint(ns + "performance-optimized-node", "true", "NoExecute"),
    )
    assert pub.extended_resources == {
        ns + "nons": "123",
        "vendor.io/dynamic": "10",
        "vendor.feature.node.kubernetes.io/static": "123",
    }
    assert set(pub.rejected["extendedResources"]) == {"bad.kubernetes.io/malo"}
    assert pub.annotations == {
        ns + "defaul-ns-annotation": "foo",
        ns + "defaul-ns-annotation-2": "bar",
        "custom.vendor.io/feature": "baz",
    }
    assert set(pub.rejected["annotations"]) == {
        "kubernetes.io/feature",
        "subns.kubernetes.io/blah",
        "nfd.node.kubernetes.io/xyz",
    }


def test_upstream_e2e_updated_taints_are_filtered(h: SimpleNamespace) -> None:
    rs = h.load_files("upstream/e2e-nfr-1-2-3updated-4-5.yaml")
    _, pub = publish(rs, h.fake(), enable_taints=True)
    ns = "feature.node.kubernetes.io/"
    assert pub.taints == (
        Taint(ns + "fake-special-node", "exists", "PreferNoSchedule"),
        Taint(ns + "foo", "true", "NoExecute"),
    )
    assert set(pub.rejected["taints"]) == {
        "kubernetes.io/denied-1:PreferNoSchedule",
        "node.kubernetes.io/denied-2:PreferNoSchedule",
        "unprefixed-taint:PreferNoSchedule",
    }
    _, off = publish(rs, h.fake())
    assert off.taints == ()
    assert set(off.rejected["taints"].values()) == {"taints are disabled (enable with --enable-taints)"}


def test_e2e_restricted_namespaces_rule(h: SimpleNamespace) -> None:
    _, pub = publish(h.load_files("upstream/e2e-nfr-6-disable-labels.yaml"), h.fake())
    assert pub.labels == {"e2e.feature.node.kubernetes.io/restricted-label-1": "true"}
    assert pub.annotations == {"e2e.feature.node.kubernetes.io/restricted-annoation-1": "yes"}
    assert pub.extended_resources == {"e2e.feature.node.kubernetes.io/restricted-er-1": "2"}


def test_upstream_samples_reproduce_the_builtin_labels(h: SimpleNamespace) -> None:
    features = Features.from_json((BASELINE / "features.json").read_text())
    names = [
        f"upstream/rw-nfd-sample-{s}.yaml"
        for s in ("cpu", "kernel", "memory", "network", "pci", "storage", "system", "usb", "local", "custom")
    ]
    out, pub = publish(h.load_files(*names), features)
    assert out.errors == []
    baseline = {}
    for line in (BASELINE / "labels.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            baseline[k] = v
    # The sample's kernel-config rule needs all four options at once (unlike the
    # built-in source), so NO_HZ/NO_HZ_IDLE are the only built-in labels it misses.
    missing = set(baseline) - set(pub.labels)
    assert missing == {
        "feature.node.kubernetes.io/kernel-config.NO_HZ",
        "feature.node.kubernetes.io/kernel-config.NO_HZ_IDLE",
    }
    assert {k: pub.labels[k] for k in baseline if k in pub.labels} == {
        k: v for k, v in baseline.items() if k not in missing
    }


def test_docs_examples(h: SimpleNamespace) -> None:
    f = h.base()
    f.flags["kernel.loadedmodule"] |= {"dummy", "e1000"}
    f.instances["pci.device"].append({"class": "0200", "vendor": "0fff", "device": "1234"})
    # b1 and b17 name their object as b21 does: given together, b21 (the later) replaces
    # them, as kubectl apply would; they are evaluated on their own here.
    same_name = ("upstream/docs-cg-b1.yaml", "upstream/docs-cg-b17.yaml")
    names = [p for p in ALL_FILES if p.startswith("upstream/docs-") and p not in same_name]
    _, pub_b1 = publish(h.load_files(same_name[0]), f)
    assert pub_b1.labels["feature.node.kubernetes.io/my-sample-feature"] == "true"
    _, pub_b17 = publish(h.load_files(same_name[1]), f)
    assert pub_b17.labels["feature.node.kubernetes.io/custom-label"] == "customlabel"
    # "@kernel.config.LSM" resolves to "lockdown,yama,apparmor": not a valid label value,
    # so the label is dropped as upstream drops it.
    assert (
        "lockdown,yama,apparmor" in pub_b17.rejected["labels"]["feature.node.kubernetes.io/linux-lsm-enabled"]
    )
    out, pub = publish(h.load_files(*names), f)
    labels = pub.labels
    assert labels["feature.node.kubernetes.io/vendor-0200-1234.present"] == "true"  # b29 shorthand
    assert labels["feature.node.kubernetes.io/num-intel-network-controllers"] == "1"
    assert labels["feature.node.kubernetes.io/first-intel-network-controllers"] == "0200"
    assert labels["feature.node.kubernetes.io/high-level-feature"] == "true"
    assert labels["feature.node.kubernetes.io/my-special-cpu-feature"] == "true"
    assert "feature.node.kubernetes.io/my-special-feature" not in labels  # wants kernel 5.x, node has 6.8
    assert labels["feature.node.kubernetes.io/example-custom-feature"] == "true"
    assert pub.extended_resources == {"vendor.io/dynamic": "6", "vendor.io/static": "123"}
    assert pub.annotations["custom.vendor.io/feature"] == "baz"
    # b31 keys its template by "system.osRelease": upstream fails that rule the same way.
    assert [(e.object, e.reason.split(":")[0]) for e in out.errors] == [
        ("docs-cg-b31", "failed to expand template")
    ]
