"""Feature sets of real nodes, written from real device facts, and rule helpers."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from nfd.features import Features
from nfd.rules import RuleOutput, RuleSet, evaluate, load_rulesets

RULE_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"


def base_features() -> Features:
    """A plain x86 server: what every node below starts from."""
    f = Features()
    f.set_flags("cpu.cpuid", ["AVX", "AVX2", "AVX512F", "AESNI", "SSE4", "X86_64_V3"])
    f.set_attributes("cpu.model", {"vendor_id": "Intel", "family": "6", "id": "143"})
    f.set_attributes(
        "kernel.version", {"full": "6.8.0-45-generic", "major": "6", "minor": "8", "revision": "0"}
    )
    f.set_attributes("kernel.config", {"X86": "y", "LSM": "lockdown,yama,apparmor", "PREEMPT": "y"})
    f.set_flags("kernel.loadedmodule", ["overlay", "br_netfilter", "veth"])
    f.set_flags("kernel.enabledmodule", ["overlay", "br_netfilter", "veth", "ext4"])
    f.set_attributes("system.osrelease", {"ID": "ubuntu", "VERSION_ID": "24.04", "VERSION_ID.major": "24"})
    f.set_attributes("system.name", {"nodename": "worker-1"})
    f.set_instances(
        "pci.device",
        [
            # An Intel X710 NIC and a Matrox BMC VGA: on almost every server.
            {
                "class": "0200",
                "vendor": "8086",
                "device": "1572",
                "subsystem_vendor": "8086",
                "subsystem_device": "0000",
                "sriov_totalvfs": "64",
            },
            {
                "class": "0300",
                "vendor": "102b",
                "device": "0536",
                "subsystem_vendor": "15d9",
                "subsystem_device": "1b95",
            },
        ],
    )
    return f


def intel_accel_node() -> Features:
    """Sapphire Rapids with QAT 4xxx, DSA, IAA, DLB, a Flex 170 GPU, an Arria 10 FPGA
    card and a Meteor Lake NPU, drivers loaded."""
    f = base_features()
    f.instances["pci.device"] += [
        {
            "class": "0b40",
            "vendor": "8086",
            "device": "4940",
            "subsystem_vendor": "8086",
            "subsystem_device": "0000",
        },
        {
            "class": "0880",
            "vendor": "8086",
            "device": "0b25",
            "subsystem_vendor": "8086",
            "subsystem_device": "0000",
        },
        {
            "class": "0880",
            "vendor": "8086",
            "device": "0cfe",
            "subsystem_vendor": "8086",
            "subsystem_device": "0000",
        },
        {
            "class": "0b40",
            "vendor": "8086",
            "device": "2710",
            "subsystem_vendor": "8086",
            "subsystem_device": "0000",
        },
        {
            "class": "0380",
            "vendor": "8086",
            "device": "56c0",
            "subsystem_vendor": "8086",
            "subsystem_device": "4905",
        },
        {
            "class": "1200",
            "vendor": "8086",
            "device": "09c4",
            "subsystem_vendor": "8086",
            "subsystem_device": "0000",
        },
        {
            "class": "1200",
            "vendor": "8086",
            "device": "7d1d",
            "subsystem_vendor": "8086",
            "subsystem_device": "0000",
        },
    ]
    f.flags["kernel.loadedmodule"] |= {
        "intel_qat",
        "qat_4xxx",
        "vfio_pci",
        "idxd",
        "dlb2",
        "i915",
        "dfl_pci",
        "intel_vpu",
    }
    f.flags["kernel.enabledmodule"] |= {
        "intel_qat",
        "qat_4xxx",
        "vfio-pci",
        "idxd",
        "dlb2",
        "i915",
        "dfl_pci",
        "intel_vpu",
    }
    return f


def sgx_node(epc: str = "68719476736") -> Features:
    """An Ice Lake server with SGX enabled: 64 GiB of EPC."""
    f = base_features()
    f.flags["cpu.cpuid"] |= {"SGX", "SGXLC"}
    f.set_attributes("cpu.security", {"sgx.enabled": "true", "sgx.epc": epc})
    f.attributes["kernel.config"]["X86_SGX"] = "y"
    return f


def nvidia_h100_tdx_node() -> Features:
    """A TDX host with an H100 SXM5 80GB (10de:2330, class 0302) and GPUDirect drivers."""
    f = base_features()
    f.instances["pci.device"].append(
        {
            "class": "0302",
            "vendor": "10de",
            "device": "2330",
            "subsystem_vendor": "10de",
            "subsystem_device": "16c1",
        }
    )
    f.set_attributes("cpu.security", {"tdx.enabled": "true", "tdx.total_keys": "63"})
    f.flags["kernel.loadedmodule"] |= {"nvidia", "nvidia_uvm", "nvidia_peermem", "nvidia_fs", "gdrdrv"}
    return f


def fake_features() -> Features:
    """The 'fake' source of upstream's e2e tests (source/fake defaults)."""
    f = Features()
    f.set_flags("fake.flag", ["flag_1", "flag_2", "flag_3"])
    f.set_attributes("fake.attribute", {"attr_1": "true", "attr_2": "false", "attr_3": "10"})
    f.set_instances(
        "fake.instance",
        [
            {"name": "instance_1", "attr_1": "true", "attr_2": "false", "attr_3": "10", "attr_4": "foobar"},
            {"name": "instance_2", "attr_1": "true", "attr_2": "true", "attr_3": "100", "attr_4": "zot"},
            {"name": "instance_3", "attr_1": "false", "attr_2": "false", "attr_3": "0", "attr_4": "foo"},
        ],
    )
    return f


def load_files(*names: str) -> list[RuleSet]:
    docs: list[Any] = []
    for n in names:
        docs.extend(d for d in yaml.safe_load_all((RULE_FIXTURES / n).read_text()) if d is not None)
    rulesets, errors = load_rulesets(docs)
    assert errors == []
    return rulesets


def rules_from(yaml_text: str) -> list[RuleSet]:
    rulesets, errors = load_rulesets(d for d in yaml.safe_load_all(yaml_text) if d is not None)
    assert errors == []
    return rulesets


def one_rule(body: dict[str, Any], name: str = "r") -> list[RuleSet]:
    """A NodeFeatureRule object holding one rule."""
    doc = {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeatureRule", "metadata": {"name": "obj"},
           "spec": {"rules": [{"name": name, **body}]}}  # fmt: skip
    rulesets, errors = load_rulesets([doc])
    assert errors == []
    return rulesets


def run_rules(rulesets: Iterable[RuleSet], features: Features) -> RuleOutput:
    return evaluate(list(rulesets), features)


@pytest.fixture
def h() -> SimpleNamespace:
    """The helpers above, for tests (pytest's importlib mode does not let tests import
    conftest)."""
    return SimpleNamespace(
        base=base_features,
        intel=intel_accel_node,
        sgx=sgx_node,
        nvidia=nvidia_h100_tdx_node,
        fake=fake_features,
        load_files=load_files,
        rules_from=rules_from,
        one_rule=one_rule,
        run=run_rules,
        fixtures=RULE_FIXTURES,
    )
