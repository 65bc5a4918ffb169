"""The e2e harness itself: nodes made per test, cleaned up after, the same client code
against the fake or a real cluster."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from tests.e2e.conftest import RUN_LABEL, E2ECluster


def test_nodes_made_for_the_test_take_labels_and_resources(e2e: E2ECluster) -> None:
    name = e2e.make_node("a", labels={"feature.node.kubernetes.io/e2e": "true"})
    assert name.startswith(e2e.prefix)
    v1 = e2e.core_v1()
    node = v1.read_node(name)
    assert node.metadata.labels["feature.node.kubernetes.io/e2e"] == "true"
    assert node.metadata.labels[RUN_LABEL] == e2e.run_id
    v1.patch_node(
        name, [{"op": "add", "path": "/metadata/labels/feature.node.kubernetes.io~1x", "value": "1"}]
    )
    v1.patch_node_status(name, [{"op": "add", "path": "/status/capacity/example.com~1e2e", "value": "2"}])
    assert e2e.wait_for(lambda: e2e.labels(name).get("feature.node.kubernetes.io/x"), timeout=10) == "1"
    node = v1.read_node(name)
    assert node.status.capacity["example.com/e2e"] == "2"


def test_cleanup_deletes_only_this_runs_nodes(e2e: E2ECluster) -> None:
    name = e2e.make_node("b")
    e2e.cleanup()
    with pytest.raises(ApiException) as e:
        e2e.core_v1().read_node(name)
    assert e.value.status == 404


def test_kubeconfig_is_usable(e2e: E2ECluster) -> None:
    """The kubeconfig handed to programs run as subprocesses reaches the same API."""
    from kubernetes import client, config

    name = e2e.make_node("c")
    with config.new_client_from_config(config_file=str(e2e.kubeconfig)) as api_client:
        assert client.CoreV1Api(api_client).read_node(name).metadata.name == name


@pytest.mark.fake_only
def test_fault_injection_is_fake_only(e2e: E2ECluster) -> None:
    assert e2e.fake is not None
    name = e2e.make_node("d")
    e2e.fake.faults.fail(500, verb="patch", resource="nodes")
    with pytest.raises(ApiException) as e:
        e2e.core_v1().patch_node(name, {"metadata": {"labels": {"a": "1"}}})
    assert e.value.status == 500
