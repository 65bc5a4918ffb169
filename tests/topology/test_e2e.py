"""``nfd topology-updater`` against the ``e2e`` cluster: the fake API server by default, a
real cluster with NFD_E2E_REAL_CLUSTER=1 and NFD_E2E_KUBECONFIG (tests/e2e/conftest.py).
kubelet is the PodResources stand-in either way: the Node the test makes has none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e.conftest import E2ECluster, _real_cluster, e2e  # noqa: F401 (the e2e suite's fixtures)
from podresources_standin import PodResourcesStandIn
from test_fixture_node import by_hand, resources

from nfd.hostroot import HostRoot

GROUP, VERSION, PLURAL = "topology.node.k8s.io", "v1alpha2", "noderesourcetopologies"


def _nrt(cluster: E2ECluster, name: str) -> dict[str, Any] | None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        got: dict[str, Any] = client.CustomObjectsApi(cluster.api_client).get_cluster_custom_object(
            GROUP, VERSION, PLURAL, name
        )
    except ApiException as ex:
        if ex.status == 404:
            return None
        raise
    return got


def test_updater_publishes_the_fixture_node(
    e2e: E2ECluster,  # noqa: F811 (the fixture imported above)
    host: HostRoot,
    kubelet: PodResourcesStandIn,
    kubelet_config: Path,
) -> None:
    if e2e.real:
        from kubernetes import client

        crds = client.ApiextensionsV1Api(e2e.api_client).list_custom_resource_definition()
        if f"{PLURAL}.{GROUP}" not in {c.metadata.name for c in crds.items}:
            pytest.skip("the cluster has no NodeResourceTopology CRD (deploy/overlays/topology-updater)")
    name = e2e.make_node("topo")
    node_uid = e2e.core_v1().read_node(name).metadata.uid
    try:
        p = subprocess.run(
            [sys.executable, "-m", "nfd", "topology-updater", "--oneshot", "--node-name", name,
             "--kubeconfig", str(e2e.kubeconfig), "--host-root", str(Path(host.sys).parent),
             "--podresources-socket", str(kubelet.socket), "--kubelet-config", str(kubelet_config)],
            capture_output=True, text=True, timeout=120, cwd="/",
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
        got = e2e.wait_for(lambda: _nrt(e2e, name), what="NodeResourceTopology")
        # No pods run on this Node: the shared-pool listings are told apart by overlap.
        assert {z["name"]: resources(z) for z in got["zones"]} == by_hand()
        assert got["metadata"]["ownerReferences"][0]["uid"] == node_uid
    finally:
        if e2e.real and _nrt(e2e, name) is not None:
            from kubernetes import client

            client.CustomObjectsApi(e2e.api_client).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
