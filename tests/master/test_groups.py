"""NodeFeatureGroups: membership from featureGroupRules over every node, status.nodes
kept current by the master, within etcd's object limit at any cluster size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from nfd.features import Features
from nfd.master.watches.groups import STATUS_BUDGET, status_of
from tests.fakeapi.errors import ApiError
from tests.master.kubehelpers import kube_master, wait_for

NS = "default"


def nfg(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"featureGroupRules": list(rules)},
    }


GPU_RULE = {
    "name": "gpu nodes",
    "matchFeatures": [
        {"feature": "fixture.labels", "matchExpressions": {"gpu": {"op": "In", "value": ["yes"]}}}
    ],
}


def members(fake: Any, name: str) -> list[str]:
    status = fake.objects.get("nodefeaturegroups", name, NS).get("status") or {}
    return [n["name"] for n in status.get("nodes") or []]


def test_status_follows_the_nodes(fake_api):
    fake_api.objects.create("nodefeaturegroups", nfg("gpus", GPU_RULE), NS)
    vars_rule = {"name": "set", "vars": {"big": "true"}, "matchFeatures": [{"feature": "fixture.labels"}]}
    backref = {
        "name": "uses var",
        "matchFeatures": [{"feature": "rule.matched", "matchExpressions": {"big": {"op": "IsTrue"}}}],
    }
    fake_api.objects.create("nodefeaturegroups", nfg("all", vars_rule, backref), NS)
    with kube_master(fake_api, nodefeatures__gc=False) as m:
        for n, gpu in (("n1", "yes"), ("n2", "no"), ("n3", "yes")):
            fake_api.create_node(n)
            m.put(n, {"gpu": gpu})
        wait_for(lambda: members(fake_api, "gpus") == ["n1", "n3"], what="gpu group")
        wait_for(lambda: members(fake_api, "all") == ["n1", "n2", "n3"], what="group via rule.matched vars")
        status = fake_api.objects.get("nodefeaturegroups", "gpus", NS)["status"]
        assert status["nodeCount"] == 2 and status["nodesTruncated"] is False
        mark = fake_api.log.mark()
        m.put("n2", {"gpu": "yes"})
        wait_for(lambda: members(fake_api, "gpus") == ["n1", "n2", "n3"], what="n2 joins")
        m.put("n1", {"gpu": "no"})
        wait_for(lambda: members(fake_api, "gpus") == ["n2", "n3"], what="n1 leaves")
        # Only the group whose membership changed is written.
        writes = fake_api.log.records(
            verb="patch", resource="nodefeaturegroups.nfd.k8s-sigs.io/status", since=mark
        )
        assert {w.name for w in writes} == {"gpus"}
        # A new rule set is evaluated at once.
        fake_api.objects.modify(
            "nodefeaturegroups",
            "gpus",
            lambda o: o["spec"].update(
                featureGroupRules=[{**GPU_RULE, "matchFeatures": [{"feature": "fixture.labels"}]}]
            ),
            NS,
        )
        wait_for(lambda: members(fake_api, "gpus") == ["n1", "n2", "n3"], what="new rules")
        mark = fake_api.log.mark()
        m.put("n1", {"gpu": "no", "other": "x"})  # features change, membership does not
        wait_for(lambda: m.settled(), what="settled")
        assert (
            fake_api.log.count(verb="patch", resource="nodefeaturegroups.nfd.k8s-sigs.io/status", since=mark)
            == 0
        )


def test_status_stays_within_etcds_limit_at_20000_nodes():
    names = {f"node-{i:05d}-" + "x" * (253 - 11) for i in range(20_000)}
    assert all(len(n) == 253 for n in names)
    status = status_of(names)
    size = len(json.dumps(status, separators=(",", ":")))
    assert size <= STATUS_BUDGET + 100
    assert status["nodeCount"] == 20_000 and status["nodesTruncated"] is True
    listed = [n["name"] for n in status["nodes"]]
    assert listed == sorted(names)[: len(listed)] and len(listed) > 3_000
    small = status_of({"b", "a"})
    assert small == {"nodes": [{"name": "a"}, {"name": "b"}], "nodeCount": 2, "nodesTruncated": False}


def test_the_fake_refuses_what_etcd_refuses(fake_api):
    fake_api.objects.create("nodefeaturegroups", nfg("big", GPU_RULE), NS)
    names = [f"node-{i:05d}-" + "x" * 242 for i in range(20_000)]
    flat = {"nodes": [{"name": n} for n in names]}  # upstream's status for such a group
    with pytest.raises(ApiError, match="too large"):
        fake_api.objects.modify(
            "nodefeaturegroups", "big", lambda o: o.update(status=flat), NS, subresource="status"
        )
    fake_api.objects.modify(
        "nodefeaturegroups", "big", lambda o: o.update(status=status_of(set(names))), NS, subresource="status"
    )
    assert fake_api.objects.get("nodefeaturegroups", "big", NS)["status"]["nodeCount"] == 20_000


UPSTREAM_E2E = Path(__file__).resolve().parents[1] / "fixtures" / "nodefeature" / "upstream-e2e"


def upstream_group(file: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((UPSTREAM_E2E / file).read_text())
    obj["metadata"]["namespace"] = NS
    return obj


def test_upstreams_e2e_groups(fake_api):
    fake_api.objects.create("nodefeaturegroups", upstream_group("nodefeaturegroup-1.yaml"), NS)
    fake_api.objects.create("nodefeaturegroups", upstream_group("nodefeaturegroup-2.yaml"), NS)
    fake = Features()  # what upstream's e2e fake source (and nodefeature-1.yaml) give
    fake.set_attributes("kernel.version", {"major": "6", "minor": "8"})
    fake.set_attributes("fake.attribute", {"attr_1": "true", "attr_2": "true", "attr_3": "10"})
    fake.set_instances(
        "fake.instance",
        [{"name": "instance_1", "attr_1": "true", "attr_3": "100"}, {"name": "instance_2", "attr_1": "true"}],
    )
    plain = Features()
    plain.set_attributes("cpu.model", {"family": "6"})
    with kube_master(fake_api, nodefeatures__gc=False) as m:
        for n, f in (("e2e-node", fake), ("plain-node", plain)):
            fake_api.create_node(n)
            assert (
                m.client.put(f"/api/v1/nodes/{n}/features", json={"features": f.to_dict()}).status_code == 200
            )
        wait_for(lambda: members(fake_api, "e2e-test-1") == ["e2e-node"], what="kernel.version group")
        wait_for(
            lambda: members(fake_api, "e2e-test-2") == ["e2e-node"], what="matchAny/template/backref group"
        )
