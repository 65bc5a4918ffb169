"""The master's per-node merge of NodeFeature objects with its worker's features, in
process (no API server): digests, heartbeats, shared decisions, precedence."""

from __future__ import annotations

from nfd.config import WorkerConfig
from nfd.features import Features
from nfd.master.core.metrics import Metrics
from nfd.master.decisions.decide import Decider
from nfd.master.decisions.service import MasterService
from nfd.nodefeature import NodeFeatureObject
from nfd.policy import Policy
from nfd.rules import load_rulesets
from tests.master.helpers import FixtureSource, features_with

FNS = "feature.node.kubernetes.io"


def service() -> MasterService:
    rules, _ = load_rulesets(
        [
            {
                "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
                "kind": "NodeFeatureRule",
                "metadata": {"name": "r"},
                "spec": {
                    "rules": [
                        {
                            "name": "gpu",
                            "labels": {"has-gpu": "true", "shared": "rule"},
                            "matchFeatures": [
                                {
                                    "feature": "gpu.info",
                                    "matchExpressions": {"count": {"op": "Gt", "value": ["0"]}},
                                }
                            ],
                        }
                    ]
                },
            }
        ]
    )
    d = Decider(sources=[FixtureSource()], config=WorkerConfig(), policy=Policy(), rulesets=rules)
    svc = MasterService(decider=d, metrics=Metrics())
    svc.own_namespace = "nfd"
    return svc


def gfd(node: str, **labels: str) -> NodeFeatureObject:
    return NodeFeatureObject("gpu-operator", f"nvidia-features-for-{node}", node, Features(), labels)


def with_features(node: str, ns: str, name: str, **attrs: str) -> NodeFeatureObject:
    f = Features()
    f.set_attributes("gpu.info", attrs)
    return NodeFeatureObject(ns, name, node, f, {})


def test_label_only_objects_keep_the_workers_digest_and_share_decisions() -> None:
    svc = service()
    for n in ("a", "b"):
        svc.submit(n, features=features_with({"w": "1"}))
        svc.set_node_objects(n, [gfd(n, **{"nvidia.com/gpu.count": "8"})])
    a, b = svc.store.get("a"), svc.store.get("b")
    assert a is not None and b is not None
    assert a.worker_digest == "" and svc.heartbeat("a", a.digest)
    assert a.decision.labels["nvidia.com/gpu.count"] == "8" and a.decision.labels[f"{FNS}/fixture-w"] == "1"
    assert a.decision is b.decision  # the object's name differs; the decision does not
    assert a.label_objects["nvidia.com/gpu.count"] == "NodeFeature gpu-operator/nvidia-features-for-a"


def test_objects_with_features_merge_and_heartbeats_use_the_workers_digest() -> None:
    svc = service()
    sub = svc.submit("a", features=features_with({"w": "1"}))
    own = sub.record.digest
    svc.set_node_objects("a", [with_features("a", "other", "x", count="2")])
    rec = svc.store.get("a")
    assert rec is not None and rec.digest != own and rec.worker_digest == own
    assert svc.heartbeat("a", own) and not svc.heartbeat("a", rec.digest)
    assert rec.decision.labels[f"{FNS}/has-gpu"] == "true"  # the rule saw the merged features
    # Later objects win: the own namespace first, then by name.
    svc.set_node_objects(
        "a", [with_features("a", "zz", "b", count="0"), with_features("a", "nfd", "z", count="5")]
    )
    assert f"{FNS}/has-gpu" not in svc.store.get("a").decision.labels  # type: ignore[union-attr]
    # Gone objects: the worker's features again, its digest too.
    svc.set_node_objects("a", [])
    rec = svc.store.get("a")
    assert rec is not None and rec.digest == own and rec.worker_digest == ""
    assert len(svc.store.features) == 1  # nothing left over


def test_rule_labels_override_object_labels_which_override_the_workers() -> None:
    svc = service()
    svc.submit("a", features=features_with({"w": "worker", "shared": "worker"}))
    svc.set_node_objects("a", [with_features("a", "x", "o", count="1")])
    svc.set_node_objects(
        "a",
        [
            NodeFeatureObject(
                "x",
                "o",
                "a",
                svc.objects.load(svc.node_objects["a"])[0].features,
                {"fixture-w": "object", "shared": "object"},
            ),
        ],
    )
    d = svc.store.get("a").decision  # type: ignore[union-attr]
    assert d.labels[f"{FNS}/fixture-w"] == "object"  # the object's label overrides the worker's
    assert d.origins[f"{FNS}/fixture-w"] == "NodeFeature"
    assert d.labels[f"{FNS}/shared"] == "rule"
    assert d.origins[f"{FNS}/shared"] == "NodeFeatureRule r"


def test_a_node_known_only_from_objects_and_forget_keeps_the_objects() -> None:
    svc = service()
    svc.set_node_objects("g", [gfd("g", **{"nvidia.com/gpu.count": "8"})])
    rec = svc.store.get("g")
    assert rec is not None and not rec.has_worker and rec.decision.labels == {"nvidia.com/gpu.count": "8"}
    assert not svc.heartbeat("g", rec.digest)  # no worker of ours: nothing to confirm
    svc.forget("g")
    assert svc.store.get("g") is None and len(svc.store.features) == 0
    svc.submit("g", features=features_with({"w": "1"}))  # the worker comes (back)
    assert svc.store.get("g").decision.labels["nvidia.com/gpu.count"] == "8"  # type: ignore[union-attr]
