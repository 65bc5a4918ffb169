"""The custom source: worker-side rules on the other sources' features."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from nfd.config import SourcesConfig, WorkerConfig
from nfd.labels import node_labels
from nfd.settings import load_model
from nfd.sources import default_registry
from nfd.sources.custom import CustomSource


def mellanox_rdma_node(h: SimpleNamespace) -> object:
    f = h.base()
    # ConnectX-6 (15b3:101b, class 0207) with the RDMA user-space modules loaded.
    f.instances["pci.device"].append({"class": "0207", "vendor": "15b3", "device": "101b"})
    f.flags["kernel.loadedmodule"] |= {"mlx5_core", "mlx5_ib", "ib_uverbs", "rdma_ucm"}
    return f


def test_builtin_rdma_rules(h: SimpleNamespace) -> None:
    src = CustomSource()
    assert src.labels(h.base(), SourcesConfig()) == {}
    assert src.labels(mellanox_rdma_node(h), SourcesConfig()) == {
        "rdma.capable": "true",
        "rdma.available": "true",
    }  # type: ignore[arg-type]
    f = mellanox_rdma_node(h)
    f.flags["kernel.loadedmodule"].discard("rdma_ucm")  # type: ignore[attr-defined]
    assert src.labels(f, SourcesConfig()) == {"rdma.capable": "true"}  # type: ignore[arg-type]


def test_config_rules_backrefs_templates_and_dynamic_values(h: SimpleNamespace) -> None:
    rules = yaml.safe_load(
        """
- name: module rule
  labels: {"kernel-br_netfilter.present": "true"}
  matchFeatures:
    - feature: kernel.loadedmodule
      matchExpressions: {br_netfilter: {op: Exists}}
- name: nodename rule
  labels: {"nodename-rule.matches": "true"}
  matchFeatures:
    - feature: system.name
      matchExpressions: {nodename: {op: InRegexp, value: ["special-.*-node"]}}
- name: backref
  vars: {ok: "yes"}
  labelsTemplate: "{{ range .pci.device }}nic-{{ .device }}=true\\n{{ end }}"
  labels: {vendor.io/kernel: "@kernel.version.major"}
  matchFeatures:
    - feature: rule.matched
      matchExpressions: {"kernel-br_netfilter.present": {op: IsTrue}}
    - feature: pci.device
      matchExpressions: {class: {op: In, value: ["0200"]}}
"""
    )
    labels = CustomSource().labels(h.base(), SourcesConfig(custom=tuple(rules)))
    assert labels == {"kernel-br_netfilter.present": "true", "nic-1572": "true", "vendor.io/kernel": "6"}


def test_bad_custom_rules_are_logged_and_the_rest_apply(
    h: SimpleNamespace, caplog: pytest.LogCaptureFixture
) -> None:
    rules = (
        {"name": "legacy", "value": "x", "matchOn": [{"loadedKMod": ["veth"]}]},
        {"name": "shape", "labels": ["x"]},
        {
            "name": "fails",
            "labels": {"f": "1"},
            "matchFeatures": [{"feature": "kernel.version", "matchExpressions": {"major": {"op": "Nope"}}}],
        },
        {"name": "ok", "labels": {"ok": "1"}},
    )
    with caplog.at_level(logging.WARNING, logger="nfd.sources.custom"):
        labels = CustomSource().labels(h.base(), SourcesConfig(custom=rules))
    assert labels == {"ok": "1"}
    text = caplog.text
    assert "legacy matchOn format" in text and "sources.custom[1]" in text and "invalid Op 'Nope'" in text


def test_custom_labels_through_the_worker_path(h: SimpleNamespace, tmp_path: Path) -> None:
    # The source gets every source's features in labels(): no change to discover().
    conf = tmp_path / "nfd-worker.conf"
    conf.write_text(
        """
core:
  labelSources: [custom]
sources:
  custom:
    - name: avx rule
      labels: {my-avx: "true"}
      matchFeatures:
        - feature: cpu.cpuid
          matchName: {op: InRegexp, value: ["^AVX512"]}
"""
    )
    config, warnings = load_model(conf, WorkerConfig)
    assert warnings == []
    reg = default_registry()
    res = node_labels(reg.select(list(config.core.label_sources)), mellanox_rdma_node(h), config)  # type: ignore[arg-type]
    assert res.labels == {
        "feature.node.kubernetes.io/my-avx": "true",
        "feature.node.kubernetes.io/rdma.capable": "true",
        "feature.node.kubernetes.io/rdma.available": "true",
    }
    assert isinstance(WorkerConfig().sources.custom, tuple)


@pytest.mark.parametrize("vendor", ["15b3", "8086"])
@pytest.mark.parametrize("modules", [set(), {"ib_uverbs"}, {"ib_uverbs", "rdma_ucm"}])
def test_builtin_fast_path_equals_the_engine(h: SimpleNamespace, vendor: str, modules: set[str]) -> None:
    from nfd.sources.custom import builtin_labels, custom_rule_labels

    f = h.base()
    f.instances["pci.device"].append({"class": "0207", "vendor": vendor, "device": "101b"})
    f.flags["kernel.loadedmodule"] |= modules
    assert builtin_labels(f) == custom_rule_labels((), f)
    # and without the features at all
    assert builtin_labels(type(f)()) == custom_rule_labels((), type(f)()) == {}
