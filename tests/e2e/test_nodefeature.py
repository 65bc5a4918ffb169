"""NodeFeature objects through ``nfd master`` end to end: a GPU-feature-discovery-style
object labels its Node and the labels go when it goes; objects and worker posts merge
with upstream's precedence, and rules see the merged features."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.test_master import FNS, master, node_of

GFD = Path(__file__).resolve().parents[1] / "fixtures" / "nodefeature" / "gfd-h100-node.yaml"
GROUP, VERSION, PLURAL = "nfd.k8s-sigs.io", "v1alpha1", "nodefeatures"
NAMESPACE = "default"  # exists on every cluster


def custom(e2e: Any) -> Any:
    from kubernetes import client

    return client.CustomObjectsApi(e2e.api_client)


def gfd_object(node: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(GFD.read_text())
    obj["metadata"]["name"] = f"nvidia-features-for-{node}"
    obj["metadata"]["namespace"] = NAMESPACE
    obj["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] = node
    return obj


def test_gfd_labels_reach_the_node_and_go_with_the_object(e2e, tmp_path):
    n = e2e.make_node("gpu", labels={"team.example.com/owner": "ml"})
    obj = gfd_object(n)
    want = obj["spec"]["labels"]
    api = custom(e2e)
    api.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, copy.deepcopy(obj))
    try:
        with master(e2e, tmp_path) as m:
            labels = e2e.wait_for(
                lambda: (lb := e2e.labels(n)).get("nvidia.com/gpu.product") and lb,
                what="GPU labels on the node",
            )
            assert {k: v for k, v in labels.items() if k.startswith("nvidia.com/")} == want
            assert labels["team.example.com/owner"] == "ml"
            view = m.wait_in_sync(n)
            assert (
                view["labelOrigins"]["nvidia.com/gpu.count"]
                == f"NodeFeature {NAMESPACE}/{obj['metadata']['name']}"
            )

            # GFD relabels (a driver upgrade): the Node follows.
            changed = {**want, "nvidia.com/cuda.driver-version.full": "575.51.03"}
            api.patch_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, PLURAL, obj["metadata"]["name"], {"spec": {"labels": changed}}
            )
            e2e.wait_for(
                lambda: e2e.labels(n).get("nvidia.com/cuda.driver-version.full") == "575.51.03",
                what="the new driver label",
            )

            api.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, obj["metadata"]["name"])

            def no_gpu_labels() -> dict[str, str] | None:
                lb = e2e.labels(n)
                return None if any(k.startswith("nvidia.com/") for k in lb) else lb

            labels = e2e.wait_for(no_gpu_labels, what="GPU labels gone")
            assert labels["team.example.com/owner"] == "ml"
    finally:
        try:
            api.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, obj["metadata"]["name"])
        except Exception:  # already deleted by the test
            pass


def test_objects_merge_with_the_worker_and_rules_see_the_merge(e2e, tmp_path):
    n = e2e.make_node("merge")
    obj = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeFeature",
        "metadata": {
            "name": f"extra-for-{n}",
            "namespace": NAMESPACE,
            "labels": {"nfd.node.kubernetes.io/node-name": n},
        },
        "spec": {
            # widgets only here, kernel only from the worker: the rule needs both
            "features": {"attributes": {"attr.e2e": {"elements": {"widgets": "3"}}}},
            "labels": {"e2e-own": "yes", "e2e-kernel": "from-object", "vendor.example.com/x": "1"},
        },
    }
    api = custom(e2e)
    with master(e2e, tmp_path) as m:
        m.put(n, {"kernel": "6.1"})
        api.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, obj)
        try:
            e2e.wait_for(
                lambda: e2e.labels(n).get(f"{FNS}/e2e-accelerated") == "true", what="merged rule label"
            )
            view = m.wait_in_sync(n)
            labels = node_of(e2e, n).metadata.labels
            assert labels[f"{FNS}/e2e-kernel"] == "6.1"  # the rule's label overrides the object's
            assert labels[f"{FNS}/e2e-own"] == "yes" and labels["vendor.example.com/x"] == "1"
            origins = view["labelOrigins"]
            assert origins[f"{FNS}/e2e-kernel"] == "NodeFeatureRule e2e-rules"
            assert origins[f"{FNS}/e2e-own"] == f"NodeFeature {NAMESPACE}/extra-for-{n}"
            # The worker's heartbeat still matches its own features, not the merge.
            assert view["digest"] == m.put(n, {"kernel": "6.1"}).json()["digest"]
        finally:
            api.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, obj["metadata"]["name"])
        e2e.wait_for(lambda: f"{FNS}/e2e-own" not in e2e.labels(n), what="object labels gone")
        assert f"{FNS}/e2e-accelerated" not in e2e.labels(n)
        assert e2e.labels(n)[f"{FNS}/e2e-kernel"] == "6.1"
