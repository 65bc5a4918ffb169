"""NodeFeature objects: reading, merging as upstream's master does, and the object a
worker writes in upstream's shape."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from nfd.features import Features
from nfd.nodefeature import (
    NodeFeatureError,
    NodeFeatureObject,
    for_worker,
    merge,
    parse,
    worker_object_from_env,
)


def obj(
    ns: str, name: str, *, labels: dict[str, str] | None = None, **features: dict[str, object]
) -> NodeFeatureObject:
    return NodeFeatureObject(ns, name, "n1", Features.from_dict(features), labels or {})


def test_upstream_worker_shape() -> None:
    f = Features()
    f.set_flags("cpu.cpuid", ["AVX"])
    got = for_worker(
        node="node-1",
        namespace="node-feature-discovery",
        features=f,
        labels={"feature.node.kubernetes.io/cpu-cpuid.AVX": "true"},
        pod_name="nfd-worker-x7k2p",
        pod_uid="0f0e",
    )
    # What upstream's nfd-worker creates: named after the node, in its own namespace,
    # labelled with the node name, owned by its pod; raw features and labels in spec.
    assert got["apiVersion"] == "nfd.k8s-sigs.io/v1alpha1" and got["kind"] == "NodeFeature"
    meta = got["metadata"]
    assert (meta["name"], meta["namespace"]) == ("node-1", "node-feature-discovery")
    assert meta["labels"] == {"nfd.node.kubernetes.io/node-name": "node-1"}
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "nfd-worker-x7k2p", "uid": "0f0e"}
    ]
    assert "nfd.node.kubernetes.io/worker.version" in meta["annotations"]
    assert got["spec"] == {
        "features": {"flags": {"cpu.cpuid": {"elements": {"AVX": {}}}}, "attributes": {}, "instances": {}},
        "labels": {"feature.node.kubernetes.io/cpu-cpuid.AVX": "true"},
    }
    back = parse(got)
    assert (back.node, back.features, back.labels) == ("node-1", f, got["spec"]["labels"])


def test_no_owner_without_pod_uid() -> None:
    got = worker_object_from_env(features=Features(), labels={}, env={"NODE_NAME": "n", "POD_NAME": "p"})
    assert (
        "ownerReferences" not in got["metadata"] and got["metadata"]["namespace"] == "node-feature-discovery"
    )


def test_merge_order_and_precedence() -> None:
    own = obj(
        "nfd", "n1", labels={"a": "own", "b": "own"}, attributes={"x.y": {"elements": {"k": "own", "o": "1"}}}
    )
    later = obj(
        "gpu",
        "aaa",
        labels={"feature.node.kubernetes.io/a": "aaa"},
        attributes={"x.y": {"elements": {"k": "aaa"}}},
    )
    last = obj(
        "gpu", "zzz", labels={"b": "zzz"}, instances={"i.j": {"elements": [{"attributes": {"n": "1"}}]}}
    )
    base = Features()
    base.set_instances("i.j", [{"n": "0"}])
    base.set_flags("f.g", ["one"])
    m = merge([last, later, own], "nfd", base=base)
    # The own namespace first, then by name: later objects win, instances append.
    assert m.labels == {"feature.node.kubernetes.io/a": "aaa", "feature.node.kubernetes.io/b": "zzz"}
    assert m.origins == {
        "feature.node.kubernetes.io/a": "NodeFeature gpu/aaa",
        "feature.node.kubernetes.io/b": "NodeFeature gpu/zzz",
    }
    assert m.features.attributes["x.y"] == {"k": "aaa", "o": "1"}
    assert m.features.instances["i.j"] == [{"n": "0"}, {"n": "1"}]
    assert m.features.flags["f.g"] == {"one"}
    assert base.instances["i.j"] == [{"n": "0"}]  # the base is not changed


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ("nope", "not an object"),
        ({"spec": {"labels": {"a": 1}}}, "spec.labels"),
        ({"spec": {"features": {"flags": {"x": 1}}}}, "spec.flags.x"),
        ({"metadata": "x"}, "metadata"),
    ],
)
def test_bad_objects(raw: object, where: str) -> None:
    with pytest.raises(NodeFeatureError, match=where):
        parse(raw)


def test_discover_prints_the_object(tmp_path: object) -> None:
    env = {
        "NODE_NAME": "node-9",
        "POD_NAMESPACE": "nfd",
        "POD_NAME": "w",
        "POD_UID": "u",
        "PATH": "/usr/bin:/bin",
    }
    r = subprocess.run(
        [sys.executable, "-m", "nfd", "discover", "-o", "nodefeature", "--sources", "kernel"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    got = yaml.safe_load(r.stdout)
    assert got["metadata"]["name"] == "node-9" and got["metadata"]["namespace"] == "nfd"
    assert got["metadata"]["ownerReferences"][0]["uid"] == "u"
    assert "kernel.version" in got["spec"]["features"]["attributes"]
    assert all(k.startswith("feature.node.kubernetes.io/kernel-") for k in got["spec"]["labels"])


def test_prefixed_spelling_wins_whatever_the_order() -> None:
    from nfd.policy import qualified_labels

    for labels in (
        {"a": "plain", "feature.node.kubernetes.io/a": "prefixed"},
        {"feature.node.kubernetes.io/a": "prefixed", "a": "plain"},
    ):
        assert qualified_labels(labels) == {"feature.node.kubernetes.io/a": "prefixed"}
