"""The NodeFeature and NodeFeatureGroup CRDs take what upstream's tools write, and what
nfd writes in upstream's shape."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml
from deploy.conftest import DEPLOY, REPO

from nfd.features import Features
from nfd.nodefeature import for_worker


def schema(name: str) -> dict[str, Any]:
    crd = yaml.safe_load((DEPLOY / f"base/crd/{name}-crd.yaml").read_text())
    assert crd["spec"]["group"] == "nfd.k8s-sigs.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]
    out: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return out


def test_gfd_object_fits() -> None:
    obj = yaml.safe_load((REPO / "tests/fixtures/nodefeature/gfd-h100-node.yaml").read_text())
    jsonschema.validate(obj, schema("nodefeature"))


def test_nfd_worker_object_fits() -> None:
    f = Features()
    f.set_flags("cpu.cpuid", ["AVX"])
    f.set_attributes("kernel.version", {"major": "6"})
    f.set_instances("pci.device", [{"vendor": "10de"}])
    obj = for_worker(node="n1", namespace="nfd", features=f, labels={"a": "1"}, pod_name="p", pod_uid="u")
    jsonschema.validate(obj, schema("nodefeature"))


@pytest.mark.parametrize(
    "bad",
    [
        {"spec": {"labels": {"a": 1}}},
        {"spec": {"features": {"attributes": {"x.y": {"elements": {"k": 1}}}}}},
        {"spec": {"features": {"flags": {"x.y": {}}}}},  # elements required
    ],
)
def test_nodefeature_schema_rejects(bad: dict[str, Any]) -> None:
    obj = {"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature", "metadata": {"name": "x"}, **bad}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, schema("nodefeature"))


def test_nodefeaturegroup_fits_upstreams_sample() -> None:
    nfg = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureGroup",
        "metadata": {"name": "node-feature-group-example", "namespace": "default"},
        "spec": {
            "featureGroupRules": [
                {
                    "name": "kernel version",
                    "matchFeatures": [
                        {
                            "feature": "kernel.version",
                            "matchExpressions": {"major": {"op": "In", "value": ["6"]}},
                        }
                    ],
                }
            ]
        },
        "status": {"nodes": [{"name": "n1"}, {"name": "n2"}]},
    }
    jsonschema.validate(nfg, schema("nodefeaturegroup"))
    nfg["spec"]["featureGroupRules"][0]["matchFeatures"][0]["matchExpressions"]["major"]["op"] = "Like"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(nfg, schema("nodefeaturegroup"))
    crd = yaml.safe_load((DEPLOY / "base/crd/nodefeaturegroup-crd.yaml").read_text())
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert crd["spec"]["names"]["shortNames"] == ["nfg"]


def test_the_crds_are_in_the_base() -> None:
    kust = yaml.safe_load((DEPLOY / "base/kustomization.yaml").read_text())
    for name in ("nodefeaturerule", "nodefeature", "nodefeaturegroup"):
        assert f"crd/{name}-crd.yaml" in kust["resources"]
