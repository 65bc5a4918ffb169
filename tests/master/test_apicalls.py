"""Every API call is counted by verb and resource (one hook on the client), and the API
server's answers become typed exceptions in one place."""

from __future__ import annotations

import re

import pytest

from nfd.master import apierrors
from nfd.master.kube import classify

from .kubehelpers import kube_master, wait_for


@pytest.mark.parametrize(
    ("method", "url", "want"),
    [
        ("PATCH", "http://h/api/v1/nodes/n1", ("patch", "nodes")),
        ("PATCH", "http://h/api/v1/nodes/n1/status", ("patch", "nodes/status")),
        ("GET", "http://h/api/v1/nodes?limit=500", ("list", "nodes")),
        ("GET", "http://h/api/v1/nodes?watch=True&resourceVersion=5", ("watch", "nodes")),
        ("GET", "http://h/api/v1/namespaces/ns/pods/p", ("get", "pods")),
        ("PUT", "http://h/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", ("update", "leases")),
        ("POST", "http://h/apis/authentication.k8s.io/v1/tokenreviews", ("create", "tokenreviews")),
        ("GET", "http://h/apis/nfd.k8s-sigs.io/v1alpha1/nodefeaturerules", ("list", "nodefeaturerules")),
        ("GET", "http://h/version", ("get", "version")),
    ],
)
def test_classify(method, url, want):
    assert classify(method, url) == want


def test_every_api_call_is_counted_with_its_resource(fake_api):
    fake_api.create_node("n1")
    token = fake_api.issue_worker_token("n1", bind_node=False)  # the master reads the pod
    with kube_master(
        fake_api, auth__enabled=True, leader__enabled=True, leader__identity="m", rules__watch=True
    ) as m:
        wait_for(lambda: m.runtime.elector.leader and m.runtime.rules.synced, what="leads, rules listed")
        assert m.put("n1", {"a": "1"}, token=token).status_code == 200
        wait_for(m.settled, what="publish")
        prom = fake_api.tokens.issue_service_account("monitoring", "prometheus")
        fake_api.authz.grant(
            user="system:serviceaccount:monitoring:prometheus", verbs=["get"], non_resource_urls=["/metrics"]
        )
        text = m.client.get("/metrics", headers={"Authorization": f"Bearer {prom}"}).text
    counted = {
        (v, r): float(n)
        for v, r, n in re.findall(
            r'^nfd_master_api_requests_total\{resource="([^"]+)",verb="([^"]+)"\} (\S+)$', text, re.M
        )
        for v, r in [(r, v)]
    }
    for call in [
        ("create", "tokenreviews"),
        ("create", "subjectaccessreviews"),
        ("list", "pods"),
        ("get", "leases"),
        ("list", "nodefeaturerules"),
        ("list", "nodes"),
        ("patch", "nodes"),
    ]:
        assert counted.get(call, 0) >= 1, (call, counted)
    # The same calls the API server saw (the hook is on the client, not beside it).
    assert counted[("patch", "nodes")] == fake_api.log.count(verb="patch", resource="nodes")


@pytest.mark.parametrize(
    ("status", "cls", "stale"),
    [
        (None, apierrors.Unreachable, False),
        (401, apierrors.Unauthorized, True),
        (403, apierrors.Forbidden, True),
        (404, apierrors.NotFound, True),
        (409, apierrors.Conflict, True),
        (422, apierrors.Invalid, True),
        (429, apierrors.TooManyRequests, False),
        (500, apierrors.ServerError, False),
        (503, apierrors.ServerError, False),
        (418, apierrors.KubeError, True),
    ],
)
def test_typed_errors(status, cls, stale):
    e = apierrors.make(status, "x", retry_after=2.0)
    assert type(e) is cls and e.view_stale is stale
    assert e.reason == (str(status) if status else "unreachable")


def test_from_the_clients_exception():
    from kubernetes.client.exceptions import ApiException

    raw = ApiException(status=429, reason="Too Many Requests")
    raw.headers = {"Retry-After": "3"}
    raw.body = '{"message": "slow down"}'
    e = apierrors.from_exception(raw)
    assert isinstance(e, apierrors.TooManyRequests) and e.retry_after == 3.0 and "slow down" in str(e)
    assert isinstance(apierrors.from_exception(ConnectionResetError("reset")), apierrors.Unreachable)
