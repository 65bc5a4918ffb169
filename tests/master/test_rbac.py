"""The shipped RBAC is enough, and nothing more is used: the real ``nfd master`` runs as
its service account against the fake API server enforcing the Roles of
deploy/base/master/rbac.yaml, with TLS, worker and reader authentication, the pod
watch, leader election and the rule watch on; a real worker delivers over HTTPS."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import httpx
import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.worker.worker_helpers import HostTree, run_cli

from .test_tls import NS, MasterProc, published_ca

REPO = Path(__file__).resolve().parents[2]
MASTER_SA = f"system:serviceaccount:{NS}:nfd-master"


def test_master_runs_on_the_shipped_rbac_alone(fake_api, tmp_path):
    rbac = [d for d in yaml.safe_load_all((REPO / "deploy/base/master/rbac.yaml").read_text()) if d]
    fake_api.authz.load_rbac(rbac, NS)
    fake_api.enforce_rbac = True
    fake_api.create_node("n1")
    worker_token = tmp_path / "token"
    worker_token.write_text(fake_api.issue_worker_token("n1", audiences=("nfd-master",)))
    master_token = fake_api.tokens.issue_service_account(NS, "nfd-master")
    kc = fake_api.write_kubeconfig(tmp_path / "kubeconfig", token=master_token)
    # Enforced: what the Roles do not grant is refused (no listing of Secrets, say).
    with pytest.raises(ApiException) as e:
        client.CoreV1Api(fake_api.api_client(master_token)).list_namespaced_secret(NS)
    assert e.value.status == 403
    since = max(r.seq for r in fake_api.log.records())
    m = MasterProc("--kubeconfig", str(kc), "--enable-leader-election", "--auth-audience", "nfd-master",
                   extra_env={"POD_NAMESPACE": NS, "POD_NAME": "nfd-master-0"})  # fmt: skip
    try:
        m.wait_serving()
        ca = published_ca(fake_api, tmp_path)
        host = HostTree(tmp_path / "host")
        host.write("f", "rbac=yes\n")
        r = run_cli("worker", "--oneshot", "--master", f"https://localhost:{m.port}", "--ca-file", str(ca),
                    "--token-file", str(worker_token), "--node-name", "n1", "--sources", "local",
                    "--host-root", str(host.root))  # fmt: skip
        assert r.returncode == 0, r.stderr
        fake_api.wait_for(
            lambda: fake_api.labels("n1").get("feature.node.kubernetes.io/rbac") == "yes",
            timeout=30, what="the label on the Node",
        )  # fmt: skip
        # A reader RBAC allows gets the metrics; one it does not is refused.
        verify = ssl.create_default_context(cafile=str(ca))
        prom = fake_api.tokens.issue_service_account("monitoring", "prometheus")
        fake_api.authz.grant(user="system:serviceaccount:monitoring:prometheus", verbs=["get"],
                             non_resource_urls=["/metrics"])  # fmt: skip
        with httpx.Client(base_url=f"https://localhost:{m.port}", verify=verify) as c:
            got = c.get("/metrics", headers={"Authorization": f"Bearer {prom}"})
            assert got.status_code == 200 and "nfd_master_is_leader 1.0" in got.text
            assert c.get("/api/v1/nodes", headers={"Authorization": f"Bearer {prom}"}).status_code == 403
            assert c.get("/api/v1/nodes").status_code == 401
        time.sleep(0.5)  # let the leader's lease renewals and the watches run a little
    finally:
        m.stop()
    forbidden = [
        (r.method, r.path) for r in fake_api.log.records(since=since, status=403) if r.user == MASTER_SA
    ]
    assert forbidden == []
    used = {(r.verb, r.resource) for r in fake_api.log.records(since=since) if r.user == MASTER_SA}
    assert {("create", "secrets"), ("create", "configmaps"), ("watch", "pods"),
            ("create", "subjectaccessreviews.authorization.k8s.io")} <= used  # fmt: skip
