"""The topology-updater overlay: what the container mounts, which token it gets, and what
its RBAC and admission policy allow."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest
from deploy.conftest import build
from deploy.manifests import find, flag, pod_spec


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return build("topology-updater")


def container(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (c,) = [c for c in pod_spec(find(docs, "DaemonSet", "nfd-worker"))["containers"] if c["name"] == name]
    return c


def test_host_paths_are_read_only_and_where_the_flags_point(docs: list[dict[str, Any]]) -> None:
    spec = pod_spec(find(docs, "DaemonSet", "nfd-worker"))
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    c = container(docs, "nfd-topology-updater")
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for m in c["volumeMounts"]:
        assert m.get("readOnly") is True, m
    socket = PurePosixPath(flag(c["args"], "--podresources-socket") or "")
    assert host[mounts[str(socket.parent)]["name"]] == "/var/lib/kubelet/pod-resources"
    config = flag(c["args"], "--kubelet-config") or ""
    assert host[mounts[config]["name"]] == "/var/lib/kubelet/config.yaml"
    # Not the whole kubelet directory: it holds every pod's volumes and secrets.
    assert "/var/lib/kubelet" not in host.values()


def test_only_the_updater_gets_an_api_token(docs: list[dict[str, Any]]) -> None:
    spec = pod_spec(find(docs, "DaemonSet", "nfd-worker"))
    assert spec["automountServiceAccountToken"] is False
    token_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
    holders = [
        c["name"] for c in spec["containers"] if any(m["mountPath"] == token_dir for m in c["volumeMounts"])
    ]
    assert holders == ["nfd-topology-updater"]
    (vol,) = [v for v in spec["volumes"] if v["name"] == "api-token"]
    sources = vol["projected"]["sources"]
    assert "audience" not in sources[0]["serviceAccountToken"]  # the API server's own


def test_rbac_is_exactly_what_the_updater_calls(docs: list[dict[str, Any]]) -> None:
    role = find(docs, "ClusterRole", "nfd-topology-updater")
    rules = {
        (g, r): sorted(rule["verbs"])
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert rules == {
        ("topology.node.k8s.io", "noderesourcetopologies"): ["create", "get", "update"],
        ("", "pods"): ["list", "watch"],
        ("", "nodes"): ["get"],
    }
    binding = find(docs, "ClusterRoleBinding", "nfd-topology-updater")
    ds = find(docs, "DaemonSet", "nfd-worker")
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
    ds = find(docs, "DaemonSet", "nfd-worker")
    sa = f"system:serviceaccount:{ds['metadata']['namespace']}:{pod_spec(ds)['serviceAccountName']}"
    assert sa in vap["spec"]["matchConditions"][0]["expression"]
    assert "authentication.kubernetes.io/node-name" in vap["spec"]["validations"][0]["expression"]
    binding = find(docs, "ValidatingAdmissionPolicyBinding", "nfd-topology-updater-own-node")
    assert binding["spec"] == {"policyName": "nfd-topology-updater-own-node", "validationActions": ["Deny"]}
