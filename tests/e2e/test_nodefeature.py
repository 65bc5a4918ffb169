"""NodeFeature objects through ``nfd master`` end to end: a GPU-feature-discovery-style
object labels its Node and the labels go when it goes; objects and worker posts merge
with upstream's precedence, and rules see the merged features."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
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


def custom_api(e2e: Any) -> Any:
    """The CustomObjectsApi, once the cluster is known to serve NodeFeatures."""
    e2e.require_served(GROUP, VERSION, PLURAL)
    return custom(e2e)


def gfd_object(e2e: Any, node: str) -> dict[str, Any]:
    """GFD's object for ``node``, owned by the Node instead of GFD's DaemonSet and Pod,
    which do not exist here (with their uids, the garbage collector would take it)."""
    obj: dict[str, Any] = yaml.safe_load(GFD.read_text())
    obj["metadata"]["name"] = f"nvidia-features-for-{node}"
    obj["metadata"]["namespace"] = NAMESPACE
    obj["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] = node
    obj["metadata"]["ownerReferences"] = [e2e.owner_ref(node)]
    return obj


def test_gfd_labels_reach_the_node_and_go_with_the_object(e2e, tmp_path):
    n = e2e.make_node("gpu", labels={"team.example.com/owner": "ml"})
    api = custom_api(e2e)
    obj = gfd_object(e2e, n)
    want = obj["spec"]["labels"]
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
    api = custom_api(e2e)
    obj = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeFeature",
        "metadata": {
            "name": f"extra-for-{n}",
            "namespace": NAMESPACE,
            "labels": {"nfd.node.kubernetes.io/node-name": n},
            "ownerReferences": [e2e.owner_ref(n)],  # goes with the test's Node, whatever happens
        },
        "spec": {
            # widgets only here, kernel only from the worker: the rule needs both
            "features": {"attributes": {"attr.e2e": {"elements": {"widgets": "3"}}}},
            "labels": {"e2e-own": "yes", "e2e-kernel": "from-object", "vendor.example.com/x": "1"},
        },
    }
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


def run_worker(
    e2e: Any, tmp_path: Path, node: str, pod: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    """``nfd worker --oneshot`` as the Pod ``pod`` (an ownerReference) would run it."""
    host = tmp_path / "host"
    (host / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
    (host / "proc/sys/kernel/osrelease").write_text("6.8.0-45-generic\n")
    env = dict(os.environ, POD_NAMESPACE=NAMESPACE, POD_NAME=pod["name"], POD_UID=pod["uid"])
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run(
        [sys.executable, "-m", "nfd", "worker", "--oneshot", "--node-name", node, "--host-root", str(host),
         "--sources", "kernel", "--kubeconfig", str(e2e.kubeconfig), *extra],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_nfd_worker_writes_upstreams_object_and_nfd_master_reads_it(e2e, tmp_path):
    n = e2e.make_node("upw")
    api = custom_api(e2e)
    # The worker's own Pod owns the object: it must exist, with that uid, or the garbage
    # collector deletes the object as soon as it is written.
    pod = e2e.make_pod(NAMESPACE, f"nfd-worker-{n}", node=n)
    r = run_worker(e2e, tmp_path, n, pod, "--publish", "nodefeature")
    try:
        assert r.returncode == 0, r.stderr
        obj = api.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, n)
        # The shape upstream's nfd-worker writes (and upstream's master reads).
        meta = obj["metadata"]
        assert meta["labels"] == {"nfd.node.kubernetes.io/node-name": n}
        assert meta["ownerReferences"] == [pod]
        assert (
            obj["spec"]["features"]["attributes"]["kernel.version"]["elements"]["full"] == "6.8.0-45-generic"
        )
        assert obj["spec"]["labels"][f"{FNS}/kernel-version.major"] == "6"
        # Written again unchanged: no second write needed, the object is replaced in place.
        assert run_worker(e2e, tmp_path, n, pod, "--publish", "nodefeature").returncode == 0
        # nfd's master labels the node from it, with no worker post at all.
        with master(e2e, tmp_path):
            e2e.wait_for(
                lambda: e2e.labels(n).get(f"{FNS}/kernel-version.major") == "6", what="labels from the object"
            )
    finally:
        try:
            api.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, n)
        except Exception:  # never written: the failure above says why
            pass


def test_worker_without_api_access_says_so(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBECONFIG")}
    env["HOME"] = str(tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "nfd", "worker", "--oneshot", "--node-name", "n", "--host-root", str(host),
         "--publish", "nodefeature", "--kubeconfig", str(tmp_path / "missing")],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "no Kubernetes API access" in r.stderr and "Traceback" not in r.stderr


UPSTREAM_E2E = GFD.parent / "upstream-e2e"


def test_upstreams_e2e_nodefeatures_give_upstreams_labels(e2e, tmp_path):
    n = e2e.make_node("up")
    api = custom_api(e2e)
    made: list[str] = []

    def create(file: str) -> None:
        obj = yaml.safe_load((UPSTREAM_E2E / file).read_text())
        obj["metadata"].update(namespace=NAMESPACE, labels={"nfd.node.kubernetes.io/node-name": n})
        obj["metadata"]["name"] += f"-{n}"
        api.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, obj)
        made.append(obj["metadata"]["name"])

    def ours() -> dict[str, str]:
        return {k: v for k, v in e2e.labels(n).items() if "e2e-nodefeature" in k or "fakefeature" in k}

    try:
        with master(e2e, tmp_path, "--deny-label-ns", "*.denied.ns,random.unwanted.ns") as m:
            m.put(n, {"kernel": "6.1"})
            create("nodefeature-1.yaml")
            want = {
                f"{FNS}/e2e-nodefeature-test-1": "obj-1",  # the prefixed spelling wins
                f"{FNS}/e2e-nodefeature-test-2": "obj-1",
                f"{FNS}/fake-fakefeature3": "overridden",
            }
            e2e.wait_for(lambda: ours() == want, what=f"labels of nodefeature-1: {want}")
            create("nodefeature-2.yaml")
            want |= {
                f"{FNS}/e2e-nodefeature-test-1": "overridden-from-obj-2",
                f"{FNS}/e2e-nodefeature-test-3": "obj-2",
            }
            e2e.wait_for(lambda: ours() == want, what="nodefeature-2 overrides nodefeature-1")
            create("nodefeature-3.yaml")
            want |= {
                "custom.vendor.io/e2e-nodefeature-test-3": "vendor-ns",
                f"{FNS}/e2e-nodefeature-test-4": "obj-4",
            }
            e2e.wait_for(lambda: ours() == want, what="nodefeature-3 through the deny list")
            labels = e2e.labels(n)
            for denied in ("random.denied.ns/", "random.unwanted.ns/", "kubernetes.io/denied-label"):
                assert not any(k.startswith(denied) for k in labels), denied
            assert labels[f"{FNS}/e2e-kernel"] == "6.1"  # the worker's, untouched
            for name in made:
                api.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
            made.clear()
            e2e.wait_for(lambda: ours() == {}, what="labels gone with the objects")
    finally:
        for name in made:
            api.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, name)
