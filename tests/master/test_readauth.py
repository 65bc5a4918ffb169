"""Reads of the master's API need a credential: a token the API server authenticates
(TokenReview) whose user RBAC allows the read (SubjectAccessReview), as kube-rbac-proxy
checks. Against the fake API server over real HTTP."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from tests.fakeapi.tokens import TokenUser

from .kubehelpers import kube_master

PROM = "system:serviceaccount:monitoring:prometheus"
TOKEN_REVIEWS = "tokenreviews.authentication.k8s.io"
SARS = "subjectaccessreviews.authorization.k8s.io"
READS = ["/api/v1/nodes", "/api/v1/nodes/n1", "/api/v1/features", "/metrics"]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@contextmanager
def master_with_a_node(fake_api, **over):
    fake_api.create_node("n1")
    worker = fake_api.issue_worker_token("n1", audiences=("nfd-master",))
    with kube_master(fake_api, auth__enabled=True, auth__audience="nfd-master", **over) as m:
        assert m.put("n1", {"a": "1"}, token=worker).status_code == 200
        yield m, worker


@pytest.fixture
def authed(fake_api):
    with master_with_a_node(fake_api) as started:
        yield started


def test_reads_without_a_token_are_401_probes_stay_open(authed, fake_api):
    m, _ = authed
    for path in READS:
        r = m.client.get(path)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"] == "Bearer" and "token" in r.json()["detail"]
        r = m.client.get(path, headers=bearer("forged"))
        assert r.status_code == 401 and "invalid token" in r.json()["detail"], path
        assert m.client.get(path, headers={"Authorization": "Basic eDp5"}).status_code == 401
    assert m.client.get("/healthz").status_code == 200
    assert m.client.get("/readyz").status_code in (200, 503)  # open: no 401
    assert m.client.get("/readyz").status_code != 401


def test_reads_follow_rbac(fake_api):
    with master_with_a_node(fake_api, auth__read_cache_ttl_s=0) as (m, _):
        check_reads_follow_rbac(m, fake_api)


def check_reads_follow_rbac(m, fake_api):
    prom = fake_api.tokens.issue_service_account("monitoring", "prometheus")
    for path in READS:
        r = m.client.get(path, headers=bearer(prom))
        assert r.status_code == 403 and "may not" in r.json()["detail"], path
    fake_api.authz.grant(user=PROM, verbs=["get"], non_resource_urls=["/metrics"])
    fake_api.authz.grant(group="node-readers", verbs=["get", "list"], resources=["nodes"])
    reader = fake_api.tokens.issue_service_account("ops", "dashboard")
    fake_api.authz.grant(user="system:serviceaccount:ops:dashboard", verbs=["get"], resources=["nodes"])
    r = m.client.get("/metrics", headers=bearer(prom))
    assert r.status_code == 200 and "nfd_master_nodes" in r.text
    assert m.client.get("/api/v1/nodes/n1", headers=bearer(prom)).status_code == 403
    # get, not list: one node, not all of them
    view = m.client.get("/api/v1/nodes/n1", headers=bearer(reader))
    assert view.status_code == 200 and view.json()["node"] == "n1"
    assert m.client.get("/api/v1/nodes", headers=bearer(reader)).status_code == 403
    assert m.client.get("/api/v1/features", headers=bearer(reader)).status_code == 403
    # RBAC by group: the token's groups go into the review
    fake_api.tokens.add("ops-token", TokenUser("alice", groups=("node-readers", "system:authenticated")))
    items = m.client.get("/api/v1/nodes", headers=bearer("ops-token")).json()["items"]
    assert [i["node"] for i in items] == ["n1"]


def test_a_worker_token_does_not_read(authed):
    m, worker = authed
    # Its audience is the master's, not the API server's: the review refuses it for reads.
    r = m.client.get("/api/v1/nodes/n1", headers=bearer(worker))
    assert r.status_code == 401 and "audience" in r.json()["detail"]


def test_read_answers_are_cached(authed, fake_api):
    m, _ = authed
    admin = fake_api.admin_token()
    before = (fake_api.log.count(resource=TOKEN_REVIEWS), fake_api.log.count(resource=SARS))
    for _ in range(10):
        for path in READS:
            assert m.client.get(path, headers=bearer(admin)).status_code == 200
    after = (fake_api.log.count(resource=TOKEN_REVIEWS), fake_api.log.count(resource=SARS))
    # one TokenReview for the token, one SubjectAccessReview per kind of read
    assert (after[0] - before[0], after[1] - before[1]) == (1, 3)


def test_api_server_down_is_503_for_reads(authed, fake_api):
    m, _ = authed
    fake_api.faults.fail(503, resource=SARS, times=2)
    r = m.client.get("/metrics", headers=bearer(fake_api.admin_token()))
    assert r.status_code == 503 and r.headers["retry-after"]
    # not cached: the next read asks again
    fake_api.faults.clear()
    assert m.client.get("/metrics", headers=bearer(fake_api.admin_token())).status_code == 200


def test_the_token_may_come_in_x_nfd_authorization(authed, fake_api):
    """Through the API server's service proxy, which drops Authorization, kubectl nfd
    sends the reader's token in X-Nfd-Authorization: reviewed the same way."""
    m, _ = authed
    fake_api.tokens.add("ops-token", TokenUser("alice", groups=("node-readers", "system:authenticated")))
    fake_api.authz.grant(group="node-readers", verbs=["get", "list"], resources=["nodes"])
    r = m.client.get("/api/v1/features", headers={"X-Nfd-Authorization": "Bearer ops-token"})
    assert r.status_code == 200 and [i["node"] for i in r.json()["items"]] == ["n1"]
    r = m.client.get("/api/v1/nodes/n1", headers={"X-Nfd-Authorization": "Bearer forged"})
    assert r.status_code == 401
