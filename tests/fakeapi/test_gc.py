"""The fake's garbage collector through the real client, as a cluster's acts on
ownerReferences: dependents of owners that do not exist go, so do dependents of a deleted
owner, and references it cannot resolve keep an object as it is."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.fakeapi import FakeApiServer

NF = {"group": "nfd.k8s-sigs.io", "version": "v1alpha1", "plural": "nodefeatures"}


def ref(kind: str, name: str, uid: str, api_version: str = "v1") -> dict[str, str]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}


def owner(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    return ref(obj["kind"], meta["name"], meta["uid"], obj["apiVersion"])


def nodefeature(custom: Any, name: str, owners: list[dict[str, str]], ns: str = "gpu") -> dict[str, Any]:
    body = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeature",
        "metadata": {"name": name, "ownerReferences": owners},
        "spec": {"labels": {"a": "1"}},
    }
    made: dict[str, Any] = custom.create_namespaced_custom_object(namespace=ns, body=body, **NF)
    return made


def settle(fake: FakeApiServer, custom: Any) -> None:
    """Wait until the collector has looked at every change made so far: it takes changes
    in order, so once an object written after them is collected, they were looked at."""
    name = f"marker-{uuid.uuid4().hex[:6]}"
    nodefeature(custom, name, [ref("Pod", "nobody", "0000")])
    fake.wait_for(lambda: not fake.objects.exists("nodefeatures", name, "gpu"), what="marker collected")


def exists(fake: FakeApiServer, name: str, ns: str = "gpu") -> bool:
    return fake.objects.exists("nodefeatures", name, ns)


@pytest.fixture
def custom(fake_api_client: Any) -> Any:
    return client.CustomObjectsApi(fake_api_client)


def test_made_up_owners_are_collected_real_ones_kept(fake_api: FakeApiServer, custom: Any) -> None:
    node = fake_api.create_node("n1")
    pod = fake_api.add_pod("gpu", "gfd-n1", node_name="n1")
    nodefeature(custom, "made-up-pod", [ref("Pod", "gfd-n1", "1a2b")])  # the name exists, not that uid
    nodefeature(custom, "made-up-daemonset", [ref("DaemonSet", "gfd", "1a2b", "apps/v1")])
    nodefeature(custom, "by-pod", [owner(pod)])
    nodefeature(custom, "by-node", [owner(node)])  # cluster-scoped owner, looked up cluster-wide
    fake_api.wait_for(
        lambda: not exists(fake_api, "made-up-pod") and not exists(fake_api, "made-up-daemonset"),
        what="dependents of made-up owners collected",
    )
    settle(fake_api, custom)
    assert exists(fake_api, "by-pod") and exists(fake_api, "by-node")


def test_a_namespaced_owner_is_looked_up_in_the_dependents_namespace(
    fake_api: FakeApiServer, custom: Any
) -> None:
    fake_api.create_node("n1")
    pod = fake_api.add_pod("elsewhere", "gfd-n1", node_name="n1")
    nodefeature(custom, "cross-namespace", [owner(pod)], ns="gpu")
    fake_api.wait_for(lambda: not exists(fake_api, "cross-namespace"), what="cross-namespace owner absent")


def test_owner_deletion_takes_dependents_down_the_chain(
    fake_api: FakeApiServer, custom: Any, core_v1: Any
) -> None:
    node = fake_api.create_node("n1")
    fake_api.create_node("n2")
    pod = fake_api.add_pod("gpu", "gfd-n1", node_name="n1")
    fake_api.objects.modify(
        "pods", "gfd-n1", lambda p: p["metadata"].update(ownerReferences=[owner(node)]), "gpu"
    )
    nodefeature(custom, "by-pod", [owner(pod)])
    nodefeature(custom, "other", [owner(fake_api.node("n2"))])
    core_v1.delete_node("n1")
    fake_api.wait_for(
        lambda: not fake_api.objects.exists("pods", "gfd-n1", "gpu") and not exists(fake_api, "by-pod"),
        what="the node's pod and the pod's object collected",
    )
    assert exists(fake_api, "other")


def test_only_dangling_references_go_while_an_owner_remains(fake_api: FakeApiServer, custom: Any) -> None:
    node = fake_api.create_node("n1")
    nodefeature(custom, "mixed", [owner(node), ref("Pod", "nobody", "1a2b")])
    fake_api.wait_for(
        lambda: (
            fake_api.objects.get("nodefeatures", "mixed", "gpu")["metadata"]["ownerReferences"]
            == [owner(node)]
        ),
        what="the dangling reference removed",
    )


def test_an_update_to_made_up_owners_is_collected(fake_api: FakeApiServer, custom: Any) -> None:
    node = fake_api.create_node("n1")
    nodefeature(custom, "later", [owner(node)])
    custom.patch_namespaced_custom_object(
        namespace="gpu", name="later", body={"metadata": {"ownerReferences": [ref("Pod", "x", "1a2b")]}}, **NF
    )
    fake_api.wait_for(lambda: not exists(fake_api, "later"), what="object collected after its update")


def test_unresolvable_references_keep_the_object(fake_api: FakeApiServer, custom: Any) -> None:
    fake_api.create_node("n1")
    # An unknown kind: the real collector cannot look it up and leaves the object alone,
    # even with a made-up owner beside it.
    nodefeature(custom, "widget", [ref("Widget", "w", "1a2b", "example.com/v1"), ref("Pod", "x", "1a2b")])
    # A cluster-scoped object cannot have a namespaced owner: not collected either.
    fake_api.objects.modify(
        "nodes", "n1", lambda n: n["metadata"].update(ownerReferences=[ref("Pod", "x", "1a2b")])
    )
    settle(fake_api, custom)
    assert exists(fake_api, "widget") and fake_api.objects.exists("nodes", "n1")
    assert len(fake_api.objects.get("nodefeatures", "widget", "gpu")["metadata"]["ownerReferences"]) == 2


def test_objects_stored_before_the_server_starts_are_collected() -> None:
    api = FakeApiServer()
    api.objects.create(
        "nodefeatures", {"metadata": {"name": "early", "ownerReferences": [ref("Pod", "x", "1a2b")]}}, "gpu"
    )
    with api:
        api.wait_for(lambda: not exists(api, "early"), what="object from before the start collected")


def test_deletion_other_than_in_the_background_is_refused(fake_api: FakeApiServer, core_v1: Any) -> None:
    fake_api.create_node("n1")
    for opts in (
        client.V1DeleteOptions(propagation_policy="Foreground"),
        client.V1DeleteOptions(orphan_dependents=True),
    ):
        with pytest.raises(ApiException) as e:
            core_v1.delete_node("n1", body=opts)
        assert e.value.status == 400 and "Background" in e.value.body
    core_v1.delete_node("n1", body=client.V1DeleteOptions(propagation_policy="Background"))
