"""TokenReviews, pods, leases and NodeFeatureRule custom objects through the real client."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.fakeapi import FakeApiServer

NS = "node-feature-discovery"
RULES = {"group": "nfd.k8s-sigs.io", "version": "v1alpha1", "plural": "nodefeaturerules"}


def _review(api_client: Any, token: str, audiences: list[str] | None = None) -> Any:
    auth = client.AuthenticationV1Api(api_client)
    body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=audiences))
    return auth.create_token_review(body).status


def test_token_review_bound_token(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    fake_api.create_node("node-1")
    token = fake_api.issue_worker_token("node-1")
    status = _review(fake_api_client, token)
    assert status.authenticated is True
    assert status.user.username == "system:serviceaccount:node-feature-discovery:nfd-worker"
    assert "system:serviceaccounts:node-feature-discovery" in status.user.groups
    assert status.user.extra["authentication.kubernetes.io/node-name"] == ["node-1"]
    assert status.user.extra["authentication.kubernetes.io/node-uid"] == [
        fake_api.node("node-1")["metadata"]["uid"]
    ]
    pod = fake_api.objects.get("pods", "nfd-worker-node-1", NS)
    assert status.user.extra["authentication.kubernetes.io/pod-name"] == ["nfd-worker-node-1"]
    assert status.user.extra["authentication.kubernetes.io/pod-uid"] == [pod["metadata"]["uid"]]
    assert status.audiences == ["https://kubernetes.default.svc.cluster.local"]


def test_token_review_failures(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    status = _review(fake_api_client, "not-a-token")
    assert not status.authenticated and "invalid bearer token" in status.error
    token = fake_api.tokens.issue_service_account(NS, "nfd-worker", audiences=("nfd-master",))
    assert _review(fake_api_client, token, ["nfd-master"]).authenticated is True
    wrong = _review(fake_api_client, token, ["someone-else"])
    assert not wrong.authenticated and "audiences" in wrong.error
    # Without audiences in the review, the API server's own audience applies.
    assert not _review(fake_api_client, token).authenticated
    fake_api.tokens.revoke(token)
    assert not _review(fake_api_client, token, ["nfd-master"]).authenticated
    with pytest.raises(ApiException) as e:
        _review(fake_api_client, "")
    assert e.value.status == 422


def test_pod_lookup_for_unbound_token(fake_api: FakeApiServer, core_v1: Any, fake_api_client: Any) -> None:
    fake_api.create_node("node-2")
    token = fake_api.issue_worker_token("node-2", bind_node=False)
    status = _review(fake_api_client, token)
    assert "authentication.kubernetes.io/node-name" not in status.user.extra
    pod_name = status.user.extra["authentication.kubernetes.io/pod-name"][0]
    pod = core_v1.read_namespaced_pod(pod_name, NS)
    assert pod.spec.node_name == "node-2"
    assert pod.metadata.uid == status.user.extra["authentication.kubernetes.io/pod-uid"][0]
    with pytest.raises(ApiException) as e:
        core_v1.read_namespaced_pod(pod_name, "elsewhere")
    assert e.value.status == 404
    listed = core_v1.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-2")
    assert [p.metadata.name for p in listed.items] == [pod_name]


def _lease(holder: str, rv: str | None = None) -> client.V1Lease:
    now = dt.datetime.now(dt.UTC)
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name="nfd-master.nfd.kubernetes.io", namespace=NS, resource_version=rv),
        spec=client.V1LeaseSpec(
            holder_identity=holder, lease_duration_seconds=15, acquire_time=now, renew_time=now
        ),
    )


def test_leases_create_update_conflict_patch(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    coord = client.CoordinationV1Api(fake_api_client)
    name = "nfd-master.nfd.kubernetes.io"
    created = coord.create_namespaced_lease(NS, _lease("a"))
    assert created.spec.holder_identity == "a"
    with pytest.raises(ApiException) as e:
        coord.create_namespaced_lease(NS, _lease("b"))
    assert e.value.status == 409 and json.loads(e.value.body)["reason"] == "AlreadyExists"
    # Two candidates race with the same resourceVersion: one wins, the other conflicts.
    rv = coord.read_namespaced_lease(name, NS).metadata.resource_version
    won = coord.replace_namespaced_lease(name, NS, _lease("b", rv))
    assert won.spec.holder_identity == "b"
    with pytest.raises(ApiException) as e:
        coord.replace_namespaced_lease(name, NS, _lease("c", rv))
    body = json.loads(e.value.body)
    assert e.value.status == 409 and body["reason"] == "Conflict"
    assert body["details"] == {"name": name, "group": "coordination.k8s.io", "kind": "leases"}
    assert 'leases.coordination.k8s.io "nfd-master.nfd.kubernetes.io"' in body["message"]
    patched = coord.patch_namespaced_lease(name, NS, {"spec": {"leaseTransitions": 2}})
    assert patched.spec.lease_transitions == 2 and patched.spec.holder_identity == "b"
    assert fake_api.lease(name, NS)["spec"]["leaseTransitions"] == 2
    with pytest.raises(ApiException) as e:
        coord.read_namespaced_lease("other", NS)
    assert e.value.status == 404


def test_node_feature_rules_crud(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    api = client.CustomObjectsApi(fake_api_client)
    rule = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "gpu"},
        "spec": {"rules": [{"name": "r", "labels": {"gpu": "true"}}]},
    }
    created = api.create_cluster_custom_object(**RULES, body=rule)
    assert created["metadata"]["generation"] == 1 and created["kind"] == "NodeFeatureRule"
    fake_api.create_rule("aaa", [])
    listed = api.list_cluster_custom_object(**RULES)
    assert listed["kind"] == "NodeFeatureRuleList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["aaa", "gpu"]
    assert all(i["kind"] == "NodeFeatureRule" for i in listed["items"])  # custom lists keep kind
    got = api.get_cluster_custom_object(**RULES, name="gpu")
    got["spec"]["rules"][0]["labels"]["gpu"] = "yes"
    updated = api.replace_cluster_custom_object(**RULES, name="gpu", body=got)
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as e:
        api.replace_cluster_custom_object(**RULES, name="gpu", body=got)  # stale resourceVersion
    assert e.value.status == 409
    # CustomObjectsApi sends merge patches unless told otherwise, so a JSON Patch needs
    # its content type named.
    patched = api.patch_cluster_custom_object(
        **RULES,
        name="gpu",
        body=[{"op": "replace", "path": "/spec/rules/0/name", "value": "r2"}],
        _content_type="application/json-patch+json",
    )
    assert patched["spec"]["rules"][0]["name"] == "r2"
    merged = api.patch_cluster_custom_object(**RULES, name="gpu", body={"metadata": {"labels": {"k": "v"}}})
    assert merged["metadata"]["labels"] == {"k": "v"}
    assert fake_api.log.records(verb="patch")[-1].content_type == "application/merge-patch+json"
    # Custom resources take no strategic merge patch.
    with pytest.raises(ApiException) as e:
        api.patch_cluster_custom_object(
            **RULES,
            name="gpu",
            body={"spec": {"rules": []}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert e.value.status == 415
    api.delete_cluster_custom_object(**RULES, name="gpu")
    with pytest.raises(ApiException) as e:
        api.get_cluster_custom_object(**RULES, name="gpu")
    assert e.value.status == 404
    assert json.loads(e.value.body)["message"] == 'nodefeaturerules.nfd.k8s-sigs.io "gpu" not found'


def test_version_and_health(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    info = client.VersionApi(fake_api_client).get_code()
    assert info.major == "1" and info.git_version.startswith("v1.")


def test_require_auth_and_user_in_log(fake_api: FakeApiServer) -> None:
    fake_api.create_node("n")
    fake_api.require_auth = True
    with fake_api.api_client() as anonymous:
        with pytest.raises(ApiException) as e:
            client.CoreV1Api(anonymous).read_node("n")
        assert e.value.status == 401 and json.loads(e.value.body)["reason"] == "Unauthorized"
        assert client.VersionApi(anonymous).get_code().major == "1"  # public, as on a cluster
    token = fake_api.tokens.issue_service_account(NS, "nfd-master")
    with fake_api.api_client(token) as master:
        client.CoreV1Api(master).patch_node("n", {"metadata": {"labels": {"a": "1"}}})
    with fake_api.api_client(fake_api.admin_token()) as admin:
        client.CoreV1Api(admin).read_node("n")
    assert [r.user for r in fake_api.log.records(resource="nodes")] == [
        "",
        "system:serviceaccount:node-feature-discovery:nfd-master",
        "kubernetes-admin",
    ]


def test_kubernetes_leaderelection_lease_lock(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    """The client library's own LeaseLock works against the fake: create, read, renew,
    and a candidate holding a stale copy loses the update race."""
    from kubernetes.leaderelection.leaderelectionrecord import LeaderElectionRecord
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    name = "nfd-master.nfd.kubernetes.io"
    locks = []
    for ident in ("master-a", "master-b"):
        lock = LeaseLock(name, NS, ident)
        lock.api_instance = client.CoordinationV1Api(fake_api_client)
        locks.append(lock)
    a, b = locks
    found, err = a.get(name, NS)
    assert not found and err.status == 404
    t0 = "2026-01-02 03:04:05.678901"
    assert a.create(name, NS, LeaderElectionRecord("master-a", "15", t0, t0))
    stored = fake_api.lease(name, NS)["spec"]
    assert stored["holderIdentity"] == "master-a" and stored["leaseDurationSeconds"] == 15
    assert stored["renewTime"].endswith("Z") and len(stored["renewTime"]) == len(
        "2026-01-02T03:04:05.678901Z"
    )
    found, record = b.get(name, NS)
    assert found and record.holder_identity == "master-a"
    t1 = "2026-01-02 03:04:15.000000"
    assert a.update(name, NS, LeaderElectionRecord("master-a", "15", t0, t1))
    assert not b.update(name, NS, LeaderElectionRecord("master-b", "15", t1, t1))  # stale: 409
    assert fake_api.lease(name, NS)["spec"]["holderIdentity"] == "master-a"
    assert fake_api.log.count(verb="update", resource="leases.coordination.k8s.io", status=409) == 1


def test_direct_state_access(fake_api: FakeApiServer, core_v1: Any) -> None:
    """objects.* changes state as the API would: new resourceVersions, status kept apart."""
    fake_api.create_node("n")
    rv = int(fake_api.node("n")["metadata"]["resourceVersion"])
    out = fake_api.objects.modify("nodes", "n", lambda o: o["metadata"]["labels"].update(k="v"))
    assert out["metadata"]["labels"]["k"] == "v" and int(out["metadata"]["resourceVersion"]) > rv
    # A plain modify leaves status alone; subresource="status" changes it.
    fake_api.objects.modify("nodes", "n", lambda o: o["status"]["capacity"].update(cpu="64"))
    assert fake_api.capacity("n")["cpu"] == "2"
    fake_api.objects.modify(
        "nodes", "n", lambda o: o["status"]["capacity"].update(cpu="64"), subresource="status"
    )
    assert core_v1.read_node("n").status.capacity["cpu"] == "64"
    # set stores a whole object, status included, creating it when missing.
    node = fake_api.node("n")
    node["metadata"]["labels"] = {"only": "this"}
    node["status"]["capacity"] = {"cpu": "1"}
    fake_api.objects.set("nodes", node)
    assert fake_api.labels("n") == {"only": "this"} and fake_api.capacity("n") == {"cpu": "1"}
    fake_api.objects.set(
        "leases", {"metadata": {"name": "l", "namespace": NS}, "spec": {"holderIdentity": "x"}}
    )
    assert fake_api.lease("l", NS)["spec"]["holderIdentity"] == "x"
    assert [p["metadata"]["name"] for p in fake_api.objects.list("leases", NS)] == ["l"]
    fake_api.objects.delete("leases", "l", NS)
    assert not fake_api.objects.exists("leases", "l", NS)
    with pytest.raises(KeyError):
        fake_api.objects.get("widgets", "x")
