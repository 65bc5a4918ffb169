"""Every API call is counted by verb, resource and code (one hook on the client)."""

from __future__ import annotations

import re

import pytest

from nfd.kube.transport import classify

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
    counted: dict[tuple[str, str], float] = {}
    for code, r, v, n in re.findall(
        r'^nfd_master_api_requests_total\{code="([^"]+)",resource="([^"]+)",verb="([^"]+)"\} (\S+)$',
        text,
        re.M,
    ):
        assert code.isdigit() or code == "unreachable"
        counted[(v, r)] = counted.get((v, r), 0.0) + float(n)
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


async def test_a_node_write_is_sent_and_kept_on_the_event_loop(fake_api):
    """A Node write goes out on the event loop, not through the client's threads (their
    hand-offs cost the CPU the API server wants), and the parsed Node is reduced as soon
    as it is parsed (the master's memory with many writes in flight)."""
    import threading

    from nfd.master.core.kube import KubeApi
    from nfd.master.core.settings import KubeSettings

    fake_api.create_node("n")
    kube = KubeApi(fake_api.api_client(), KubeSettings())
    threads: list[int] = []

    def keep(node: dict[str, object]) -> object:
        threads.append(threading.get_ident())
        return node["metadata"]["labels"]  # type: ignore[index]

    try:
        ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "1"}}]
        labels = await kube.patch_node("n", ops, keep)
        status = await kube.patch_node_status(
            "n", [{"op": "add", "path": "/status/capacity/x", "value": "1"}], dict
        )
    finally:
        kube.close()
    assert labels == {"a": "1"}
    assert status["status"]["capacity"]["x"] == "1"
    assert threads == [threading.get_ident()]
