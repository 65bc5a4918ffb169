"""The topology-updater overlay: a DaemonSet of its own, what it mounts, which token it
gets, and what its RBAC and admission policy allow."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest
from deploy.conftest import build
from deploy.manifests import find, flag, pod_spec, rbac_rules


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return build("topology-updater")


def updater(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return find(docs, "DaemonSet", "nfd-topology-updater")


def test_the_worker_is_left_as_the_base_has_it(docs: list[dict[str, Any]]) -> None:
    # A node whose kubelet keeps its config elsewhere must still be labelled: nothing of
    # the updater's (its host paths, its token) is in the worker's pod.
    assert find(docs, "DaemonSet", "nfd-worker") == find(build("default"), "DaemonSet", "nfd-worker")


def test_host_paths_are_read_only_and_where_the_flags_point(docs: list[dict[str, Any]]) -> None:
    spec = pod_spec(updater(docs))
    host = {v["name"]: v["hostPath"] for v in spec["volumes"] if "hostPath" in v}
    (c,) = spec["containers"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for m in c["volumeMounts"]:
        assert m.get("readOnly") is True, m
    socket = PurePosixPath(flag(c["args"], "--podresources-socket") or "")
    assert host[mounts[str(socket.parent)]["name"]]["path"] == "/var/lib/kubelet/pod-resources"
    config = host[mounts[flag(c["args"], "--kubelet-config") or ""]["name"]]
    # "File": a node without the file keeps only this pod waiting, and nothing is made in
    # its place (an unchecked hostPath leaves a directory there; FileOrCreate a file).
    assert config == {"path": "/var/lib/kubelet/config.yaml", "type": "File"}
    # Not the whole kubelet directory: it holds every pod's volumes and secrets.
    assert "/var/lib/kubelet" not in [v["path"] for v in host.values()]


def test_only_the_updater_gets_an_api_token(docs: list[dict[str, Any]]) -> None:
    worker = pod_spec(find(docs, "DaemonSet", "nfd-worker"))
    assert worker["automountServiceAccountToken"] is False
    spec = pod_spec(updater(docs))
    assert spec["automountServiceAccountToken"] is True
    assert spec["serviceAccountName"] == "nfd-topology-updater" != worker["serviceAccountName"]
    assert find(docs, "ServiceAccount", "nfd-topology-updater")


def test_rbac_is_exactly_what_the_updater_calls(docs: list[dict[str, Any]]) -> None:
    assert rbac_rules(docs, "ClusterRole", "nfd-topology-updater") == {
        ("topology.node.k8s.io", "noderesourcetopologies", ("create", "get", "update")),
        ("", "pods", ("list", "watch")),
        ("", "nodes", ("get",)),
    }
    binding = find(docs, "ClusterRoleBinding", "nfd-topology-updater")
    ds = updater(docs)
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": pod_spec(ds)["serviceAccountName"],
            "namespace": ds["metadata"]["namespace"],
        }
    ]


def test_admission_policy_ties_writes_to_the_callers_node(docs: list[dict[str, Any]]) -> None:
    vap = find(docs, "ValidatingAdmissionPolicy", "nfd-topology-updater-own-node")
    (rule,) = vap["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["noderesourcetopologies"] and set(rule["operations"]) >= {"CREATE", "UPDATE"}
    ds = updater(docs)
    sa = f"system:serviceaccount:{ds['metadata']['namespace']}:{pod_spec(ds)['serviceAccountName']}"
    assert sa in vap["spec"]["matchConditions"][0]["expression"]
    assert "authentication.kubernetes.io/node-name" in vap["spec"]["validations"][0]["expression"]
    binding = find(docs, "ValidatingAdmissionPolicyBinding", "nfd-topology-updater-own-node")
    assert binding["spec"] == {"policyName": "nfd-topology-updater-own-node", "validationActions": ["Deny"]}
