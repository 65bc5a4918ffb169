"""``nfd prune`` end to end: the real ``nfd master`` labels, annotates, taints and
advertises resources on Nodes, then ``nfd prune`` (a process, as the Job runs it) takes
off exactly that: each Node is as it was before the master, what others set stays. Runs
on the ``e2e`` cluster (the fake API server, or a real one); prune is always scoped to
this test's Nodes (``--node``, ``--selector``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

from nfd.features import Features
from nfd.nodefeature import for_worker
from tests.e2e.conftest import RUN_LABEL
from tests.e2e.test_master import FNS, REPO, master
from tests.e2e.test_nodefeature import GROUP, NAMESPACE, PLURAL, VERSION, custom, gfd_object

# More than test_master's rules set: a feature annotation, a taint and a label outside
# the default namespace.
MORE_RULES = textwrap.dedent("""
    apiVersion: nfd.k8s-sigs.io/v1alpha1
    kind: NodeFeatureRule
    metadata: {name: e2e-prune}
    spec:
      rules:
        - name: marked
          labels: {"vendor.example.com/e2e-marked": "yes"}
          annotations: {"e2e-note": "from-a-rule"}
          taints: [{key: example.com/e2e-taint, value: "yes", effect: PreferNoSchedule}]
          matchFeatures:
            - feature: attr.e2e
              matchExpressions: {kernel: {op: Exists}}
""")


def prune(e2e: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run(
        [sys.executable, "-m", "nfd", "prune", "--kubeconfig", str(e2e.kubeconfig), *args],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def snapshot(e2e: Any, name: str) -> dict[str, Any]:
    """What nfd may have touched on a Node: labels, annotations, taints, resources."""
    node = e2e.core_v1().read_node(name)
    return {
        "labels": dict(node.metadata.labels or {}),
        "annotations": dict(node.metadata.annotations or {}),
        "taints": sorted((t.key, t.value or "", t.effect) for t in node.spec.taints or []),
        "capacity": dict(node.status.capacity or {}),
        "allocatable": dict(node.status.allocatable or {}),
    }


def others_things(e2e: Any, name: str) -> None:
    """What someone else set: it must outlive a prune. The hand-set label is in nfd's
    own namespace but not in the master's records."""
    e2e.core_v1().patch_node(
        name,
        {
            "metadata": {
                "labels": {f"{FNS}/set-by-hand": "yes"},
                "annotations": {"team.example.com/note": "mine"},
            },
            "spec": {
                "taints": [{"key": "team.example.com/dedicated", "value": "ops", "effect": "NoSchedule"}]
            },
        },
    )


def test_prune_takes_off_what_the_master_set_and_nothing_else(e2e, tmp_path):
    a = e2e.make_node("a", labels={"team.example.com/owner": "ops"})
    b = e2e.make_node("b")
    for n in (a, b):
        others_things(e2e, n)
    before = {n: snapshot(e2e, n) for n in (a, b)}
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "more.yaml").write_text(MORE_RULES)
    with master(e2e, tmp_path, "--enable-taints") as m:
        for n in (a, b):
            m.put(n, {"kernel": "6.1", "widgets": "3"})
            m.wait_in_sync(n)
    labelled = {n: snapshot(e2e, n) for n in (a, b)}
    got = labelled[a]
    assert (
        got["labels"][f"{FNS}/e2e-kernel"] == "6.1"
        and got["labels"]["vendor.example.com/e2e-marked"] == "yes"
    )
    assert got["annotations"][f"{FNS}/e2e-note"] == "from-a-rule"
    assert ("example.com/e2e-taint", "yes", "PreferNoSchedule") in got["taints"]
    assert got["capacity"][f"{FNS}/e2e-widgets"] == "3" and got["allocatable"]["nvidia.com/gpu"] == "8"

    # A dry run lists it all and changes nothing.
    r = prune(e2e, "--dry-run", "--node", a)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for item in (
        f"label {FNS}/e2e-kernel",
        "label vendor.example.com/e2e-marked",
        f"annotation {FNS}/e2e-note",
        "annotation nfd.node.kubernetes.io/feature-labels",
        f"extended resource {FNS}/e2e-widgets",
        "extended resource nvidia.com/gpu",
        "taint example.com/e2e-taint=yes:PreferNoSchedule",
    ):
        assert f"would remove from node {a}: {item}" in lines, r.stdout
    assert not any("set-by-hand" in x or "team.example.com" in x for x in lines), r.stdout
    assert snapshot(e2e, a) == got

    # One node: it is as it was before the master; the other keeps its labels.
    r = prune(e2e, "--node", a)
    assert r.returncode == 0, r.stderr
    assert f"removed from node {a}: label {FNS}/e2e-kernel" in r.stdout.splitlines()
    assert snapshot(e2e, a) == before[a]
    assert snapshot(e2e, b) == labelled[b]

    # By label selector; a second run finds nothing left.
    r = prune(e2e, "--selector", f"{RUN_LABEL}={e2e.run_id}")
    assert r.returncode == 0, r.stderr
    assert snapshot(e2e, b) == before[b]
    assert not any(f"node {a}:" in x for x in r.stdout.splitlines())
    again = prune(e2e, "--selector", f"{RUN_LABEL}={e2e.run_id}")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("removed 0 items from 0 nodes, deleted 0 NodeFeature objects"), (
        again.stdout
    )


def test_prune_deletes_the_workers_nodefeature_objects_only(e2e, tmp_path):
    a, b = e2e.make_node("nfa"), e2e.make_node("nfb")
    api = custom(e2e)
    # As the worker writes them (nfd.nodefeature.for_worker), and one from GPU feature
    # discovery, which is not nfd's to delete.
    objs = [for_worker(node=n, namespace=NAMESPACE, features=Features()) for n in (a, b)] + [
        gfd_object(e2e, a)
    ]
    for obj in objs:
        api.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, obj)

    def names() -> set[str]:
        return {
            o["metadata"]["name"]
            for o in api.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)["items"]
        }

    try:
        r = prune(e2e, "--dry-run", "--node", a)
        assert r.returncode == 0, r.stderr
        assert f"would delete NodeFeature {NAMESPACE}/{a}" in r.stdout.splitlines()
        assert {a, b, f"nvidia-features-for-{a}"} <= names()

        r = prune(e2e, "--node", a)
        assert r.returncode == 0, r.stderr
        assert f"deleted NodeFeature {NAMESPACE}/{a}" in r.stdout.splitlines()
        left = names()
        assert a not in left
        assert {b, f"nvidia-features-for-{a}"} <= left
    finally:
        for obj in objs:
            try:
                api.delete_namespaced_custom_object(
                    GROUP, VERSION, NAMESPACE, PLURAL, obj["metadata"]["name"]
                )
            except Exception:  # deleted by the test
                pass


def test_prune_deletes_the_dra_drivers_resourceslices_of_the_pruned_nodes(e2e):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from nfd.devices.config import DEFAULT_DRIVER_NAME

    a, b = e2e.make_node("rsa"), e2e.make_node("rsb")
    api: Any = client.ResourceV1Api(e2e.api_client)

    def a_slice(node: str, driver: str) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver.split('.')[0]}"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "d0"}],
            },
        }

    # As nfd's DRA driver left them after an uninstall, and another driver's.
    objs = [a_slice(a, DEFAULT_DRIVER_NAME), a_slice(b, DEFAULT_DRIVER_NAME), a_slice(a, "gpu.example.com")]
    for obj in objs:
        api.create_resource_slice(obj, _preload_content=False)

    def names() -> set[str]:
        got = json.loads(api.list_resource_slice(_preload_content=False).data)["items"]
        return {s["metadata"]["name"] for s in got} & {o["metadata"]["name"] for o in objs}

    mine, theirs, other_node = (o["metadata"]["name"] for o in objs)
    try:
        r = prune(e2e, "--dry-run", "--node", a)
        assert r.returncode == 0, r.stderr
        assert f"would delete ResourceSlice {mine}" in r.stdout.splitlines()
        assert names() == {mine, theirs, other_node}

        r = prune(e2e, "--node", a)
        assert r.returncode == 0, r.stderr
        assert f"deleted ResourceSlice {mine}" in r.stdout.splitlines()
        assert names() == {theirs, other_node}
    finally:
        for obj in objs:
            try:
                api.delete_resource_slice(obj["metadata"]["name"], _preload_content=False)
            except ApiException:  # deleted by the test
                pass
