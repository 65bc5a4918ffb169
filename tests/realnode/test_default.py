"""The default overlay on the real node: install, labels, rules, auth, a master rollout,
the master gone and back, and an uninstall that leaves nothing of nfd."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from realnode.node import FEATURE_NS, NAMESPACE, NFD_NS, RealNode, discover_labels, memory_fits
from realnode.rules import rule_manifest

# The operator's overlay: taints on (a rule's taint must reach the node), nothing else.
TAINTS_ON = """
patches:
  - patch: |
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: nfd-master-conf, namespace: node-feature-discovery}
      data:
        nfd-master.conf: |
          enableTaints: true
"""
FEATURES_D = Path("/etc/kubernetes/node-feature-discovery/features.d")


@pytest.fixture(scope="module")
def installed(real_node: RealNode) -> Iterator[Path]:
    overlay = real_node.overlay("default", base="default", extra=TAINTS_ON)
    started = time.monotonic()
    real_node.figure("default.apply_to_ready_s", real_node.install(overlay))
    real_node.wait_for(
        lambda: len(real_node.nfd_labels()) > 10, timeout=60, what="the worker's labels on the Node"
    )
    real_node.figure("default.apply_to_labels_s", time.monotonic() - started)
    try:
        yield overlay
    finally:
        if real_node.exists("namespace", NAMESPACE):
            real_node.uninstall(overlay)


def test_labels_on_the_node_are_what_discover_prints_on_the_host(
    real_node: RealNode, installed: Path, tmp_path: Path
) -> None:
    conf = real_node.get("configmap", "-n", NAMESPACE, "nfd-worker-conf")["data"]["nfd-worker.conf"]
    want = discover_labels(conf, tmp_path)
    got = real_node.wait_for(
        lambda: (lambda now: now if now == want else None)(real_node.nfd_labels()),
        timeout=30,
        what="the Node's labels equal to nfd discover's",
        on_timeout=lambda: f"differ: {sorted(set(real_node.nfd_labels().items()) ^ set(want.items()))[:20]}",
    )
    assert len(got) > 10
    recorded = real_node.node()["metadata"]["annotations"][f"{NFD_NS}/feature-labels"]
    assert set(recorded.split(",")) == {k.removeprefix(FEATURE_NS + "/") for k in want}
    real_node.figure("default.labels", len(got))
    memory_fits(real_node, "default.memory")


def test_reads_without_a_token_are_refused(real_node: RealNode, installed: Path) -> None:
    svc = real_node.get("service", "-n", NAMESPACE, "nfd-master")["spec"]["clusterIP"]
    ca = Path(real_node.work / "nfd-master-ca.crt")
    ca.write_text(real_node.get("configmap", "-n", NAMESPACE, "nfd-master-ca")["data"]["ca.crt"])
    url = f"https://{svc}:8080/api/v1/nodes/{real_node.node_name}"
    code = real_node.netns(
        "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", str(ca),
        "--connect-to", f"nfd-master.node-feature-discovery.svc:8080:{svc}:8080",
        f"https://nfd-master.node-feature-discovery.svc:8080/api/v1/nodes/{real_node.node_name}",
    ).stdout  # fmt: skip
    assert code == "401"
    plain = real_node.netns(
        "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url.replace("https", "http")
    )
    assert plain.stdout in ("000", "400"), "the master answered plain HTTP"
    # TLS verifies: the certificate does not name the bare Service IP.
    assert real_node.netns("curl", "-s", "--cacert", str(ca), url).returncode != 0


def test_a_rules_label_resource_and_taint_reach_the_node_and_go(real_node: RealNode, installed: Path) -> None:
    rule = rule_manifest("realnode-all", label="realnode-rule", resource="realnode-widget", taint=True)
    started = time.monotonic()
    real_node.apply(rule)
    key = f"{FEATURE_NS}/realnode-rule"
    try:
        real_node.wait_for(lambda: real_node.nfd_labels().get(key) == "true", timeout=30, what=f"label {key}")
        real_node.figure("default.rule_to_label_s", time.monotonic() - started)
        node = real_node.wait_for(
            lambda: (lambda n: n if _widgets(n) == "3" and _taint(n) else None)(real_node.node()),
            timeout=30,
            what="the rule's extended resource and taint on the Node",
        )
        assert node["status"]["allocatable"][f"{FEATURE_NS}/realnode-widget"] == "3"
    finally:
        real_node.delete(rule)
    real_node.wait_for(
        lambda: (lambda n: key not in n["metadata"].get("labels", {}) and not _widgets(n) and not _taint(n))(
            real_node.node()
        ),
        timeout=30,
        what="the rule's label, extended resource and taint gone with the rule",
    )


READER = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "nfd-reader", "namespace": "default"},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "realnode-nfd-reader"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
                {"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]},
                {
                    "apiGroups": ["nfd.k8s-sigs.io"],
                    "resources": ["nodefeaturerules"],
                    "verbs": ["get", "list"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "realnode-nfd-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "realnode-nfd-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "nfd-reader", "namespace": "default"}],
        },
    ],
}


def kubectl_nfd(node: RealNode, *args: str) -> Any:
    """``kubectl nfd ...`` as an operator runs it: the plugin on PATH, their kubeconfig."""
    plugin = Path(sys.executable).parent / "kubectl-nfd"
    out = subprocess.run(
        [str(plugin), *args, f"--kubeconfig={node.kubeconfig}", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, f"kubectl nfd {' '.join(args)}: exit {out.returncode}: {out.stderr}"
    return json.loads(out.stdout)


def test_kubectl_nfd_shows_the_node_and_tries_a_rule_on_the_cluster(
    real_node: RealNode, installed: Path, tmp_path: Path
) -> None:
    real_node.apply(json.dumps(READER))
    try:
        token = real_node.kubectl("create", "token", "-n", "default", "nfd-reader").strip()
        nodes = kubectl_nfd(real_node, "nodes", f"--token={token}")
        assert nodes["source"] == "master", nodes.get("masterError")
        (row,) = [r for r in nodes["nodes"] if r["node"] == real_node.node_name]
        assert row["labels"] == len(real_node.nfd_labels()), row
        rule = tmp_path / "rule.yaml"
        rule.write_text(rule_manifest("realnode-tried", label="realnode-tried"))
        started = time.monotonic()
        tried = kubectl_nfd(real_node, "rules", "test", "--cluster", "-f", str(rule), f"--token={token}")
        real_node.figure("default.kubectl_nfd_rules_test_cluster_s", time.monotonic() - started)
        (diff,) = [d for d in tried["nodes"] if d["node"] == real_node.node_name]
        assert diff["added"]["labels"] == {f"{FEATURE_NS}/realnode-tried": "true"}, diff
        assert f"{FEATURE_NS}/realnode-tried" not in real_node.nfd_labels(), "rules test --cluster wrote"
    finally:
        real_node.delete(json.dumps(READER))


def test_a_master_rollout_changes_no_label_and_new_rules_still_apply(
    real_node: RealNode, installed: Path
) -> None:
    before = real_node.nfd_labels()
    started = time.monotonic()
    with real_node.watch_labels() as seen:
        real_node.kubectl("rollout", "restart", "-n", NAMESPACE, "deploy/nfd-master")
        real_node.kubectl(
            "rollout", "status", "-n", NAMESPACE, "deploy/nfd-master", "--timeout=180s", timeout=200
        )
        real_node.wait_ready()
    real_node.figure("default.rollout_restart_s", time.monotonic() - started)
    real_node.figure("default.rollout_label_changes", len(seen) - 1)
    assert seen == [before], f"labels changed during the rollout: {len(seen) - 1} times"
    # Every replica must now reach the leader: a new rule's label appears, a deleted
    # rule's label goes, whichever replica the worker's requests land on.
    for i in range(3):
        rule = rule_manifest(f"realnode-after-rollout-{i}", label=f"realnode-after-rollout-{i}")
        key = f"{FEATURE_NS}/realnode-after-rollout-{i}"
        started = time.monotonic()
        real_node.apply(rule)
        real_node.wait_for(
            lambda key=key: key in real_node.nfd_labels(), timeout=20, what=f"label {key} after the rollout"
        )
        real_node.figure(f"default.rule_to_label_after_rollout_{i}_s", time.monotonic() - started)
        real_node.delete(rule)
        real_node.wait_for(
            lambda key=key: key not in real_node.nfd_labels(), timeout=20, what=f"label {key} gone"
        )
    logs = real_node.logs("app.kubernetes.io/name=nfd-master")
    assert "match" not in logs or "hostname" not in logs, "a replica could not verify another's certificate"


def test_labels_are_current_soon_after_the_master_is_back(real_node: RealNode, installed: Path) -> None:
    """The masters are gone while a feature changes; once one is Ready again the worker
    delivers within 5 s."""
    real_node.kubectl("scale", "-n", NAMESPACE, "deploy/nfd-master", "--replicas=0")
    real_node.wait_for(
        lambda: (
            not real_node.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=nfd-master")["items"]
        ),
        timeout=60,
        what="master pods gone",
    )
    FEATURES_D.mkdir(parents=True, exist_ok=True)
    local = FEATURES_D / "realnode-test"
    local.write_text("realnode-local=yes\n")
    key = f"{FEATURE_NS}/realnode-local"
    try:
        time.sleep(8)  # the worker sees the file and fails to deliver, backing off
        assert key not in real_node.nfd_labels()
        real_node.kubectl("scale", "-n", NAMESPACE, "deploy/nfd-master", "--replicas=2")
        real_node.wait_for(lambda: _a_master_ready(real_node), timeout=120, what="a master Ready", every=0.1)
        ready_at = time.monotonic()
        real_node.wait_for(lambda: real_node.nfd_labels().get(key) == "yes", timeout=60, what=f"label {key}")
        delay = time.monotonic() - ready_at
        real_node.figure("default.master_ready_to_labels_s", delay)
        assert delay <= 5, f"labels current {delay:.1f} s after a master was Ready (goal 5 s)"
    finally:
        local.unlink(missing_ok=True)
        real_node.wait_ready()
    real_node.wait_for(lambda: key not in real_node.nfd_labels(), timeout=30, what=f"label {key} gone")


def test_uninstall_then_prune_leaves_nothing_of_nfd(real_node: RealNode, installed: Path) -> None:
    rule = rule_manifest("realnode-left", label="realnode-left", resource="realnode-left", taint=True)
    real_node.apply(rule)
    real_node.wait_for(
        lambda: _taint(real_node.node(), "realnode-left"),
        timeout=30,
        what="the rule's taint before uninstall",
    )
    real_node.uninstall(installed)
    real_node.prune()
    node = real_node.node()
    meta = node["metadata"]
    left = {
        "labels": sorted(k for k in meta.get("labels", {}) if FEATURE_NS in k or NFD_NS in k),
        "annotations": sorted(k for k in meta.get("annotations", {}) if NFD_NS in k or FEATURE_NS in k),
        "resources": sorted(k for k in node["status"].get("capacity", {}) if FEATURE_NS in k),
        "taints": [t["key"] for t in node["spec"].get("taints", []) if FEATURE_NS in t["key"]],
        "crds": [
            c
            for c in json.loads(real_node.kubectl("get", "crd", "-o", "json"))["items"]
            if "nfd" in c["metadata"]["name"]
        ],
    }
    assert not any(left.values()), f"left on the cluster after uninstall: {left}"


def _widgets(node: dict[str, object]) -> str | None:
    status = node.get("status")
    assert isinstance(status, dict)
    value = status.get("capacity", {}).get(f"{FEATURE_NS}/realnode-widget")
    return str(value) if value is not None else None


def _taint(node: dict[str, object], name: str = "realnode-rule") -> bool:
    spec = node.get("spec")
    assert isinstance(spec, dict)
    return any(t.get("key") == f"{FEATURE_NS}/{name}" for t in spec.get("taints", []))


def _a_master_ready(node: RealNode) -> bool:
    pods = node.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=nfd-master")["items"]
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for p in pods
        for c in p.get("status", {}).get("conditions", [])
    )
