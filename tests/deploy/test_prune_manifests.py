"""deploy/prune, the uninstall Job: valid, least privilege, the install's image, and
nothing in common with an install (deleting one never deletes the other's objects)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
from deploy.conftest import PRUNE
from deploy.manifests import containers, find, pod_spec, rbac_rules, workloads

Built = dict[str, list[dict[str, Any]]]


def test_prune_validates_strictly_offline(built: Built) -> None:
    version = kubernetes_validate.latest_version()
    for doc in built[PRUNE]:
        kubernetes_validate.validate(doc, version, strict=True)
    assert {d["kind"] for d in built[PRUNE]} == {
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job",
    }  # fmt: skip


def test_prune_rbac_is_exactly_what_prune_needs(built: Built) -> None:
    docs = built[PRUNE]
    assert rbac_rules(docs, "ClusterRole", "nfd-prune") == {
        ("", "nodes", ("get", "list", "patch")),
        ("", "nodes/status", ("patch",)),
        ("nfd.k8s-sigs.io", "nodefeatures", ("delete", "list")),
        ("resource.k8s.io", "resourceslices", ("delete", "list")),
    }
    binding = find(docs, "ClusterRoleBinding", "nfd-prune")
    assert binding["roleRef"]["name"] == "nfd-prune"
    job = find(docs, "Job", "nfd-prune")
    sa = find(docs, "ServiceAccount", pod_spec(job)["serviceAccountName"])
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": sa["metadata"]["namespace"]}
    ]
    assert job["metadata"]["namespace"] == sa["metadata"]["namespace"] == "nfd-prune"
    assert find(docs, "Namespace", "nfd-prune")


def test_prune_job_runs_nfd_prune_once_with_the_installs_image(built: Built) -> None:
    (job,) = workloads(built[PRUNE])
    (c,) = containers(job)
    assert c.get("command") is None and c["args"] == ["prune"]
    assert pod_spec(job)["restartPolicy"] == "Never"
    master = find(built["default"], "Deployment", "nfd-master")
    assert c["image"] == containers(master)[0]["image"]


def test_prune_shares_no_object_with_an_install(built: Built) -> None:
    def keys(docs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
        return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in docs}

    ours = keys(built[PRUNE])
    for overlay, docs in built.items():
        if overlay != PRUNE:
            assert ours.isdisjoint(keys(docs)), overlay
