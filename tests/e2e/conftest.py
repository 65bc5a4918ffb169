"""Where the end-to-end suite runs: the fake API server (default) or a real cluster.

- Default: every test gets a fresh ``FakeApiServer`` on 127.0.0.1.
- ``NFD_E2E_REAL_CLUSTER=1`` and ``NFD_E2E_KUBECONFIG=<path>``: tests talk to that
  cluster. They create their own Node objects (names with a unique prefix, a run label)
  and delete them afterwards; nothing else in the cluster is touched. When the cluster
  cannot be reached, every test that needs it is skipped with the reason (with
  ``NFD_E2E_REQUIRED=1``, as CI runs it, it fails instead).
- Tests marked ``@pytest.mark.fake_only`` (fault injection, direct state changes) are
  skipped against a real cluster.

Tests use the ``e2e`` fixture (an ``E2ECluster``).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.fakeapi import FakeApiServer, node_object

ENV_KUBECONFIG = "NFD_E2E_KUBECONFIG"
ENV_REAL = "NFD_E2E_REAL_CLUSTER"
ENV_REQUIRED = "NFD_E2E_REQUIRED"  # CI: a requested cluster that cannot be used fails the run
RUN_LABEL = "e2e.nfd.node.kubernetes.io/run"
T = TypeVar("T")


def real_cluster_requested() -> bool:
    return os.environ.get(ENV_REAL, "") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fake_only: needs the fake API server (fault injection, state access); skipped on a real cluster",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_fake_only(items, real=real_cluster_requested())


def mark_fake_only(items: list[pytest.Item], *, real: bool) -> None:
    if not real:
        return
    skip = pytest.mark.skip(
        reason=f"needs the fake API server's fault injection or state access ({ENV_REAL}=1)"
    )
    for item in items:
        if item.get_closest_marker("fake_only"):
            item.add_marker(skip)


@dataclass
class E2ECluster:
    """What a test talks to. ``fake`` is the FakeApiServer, or None on a real cluster."""

    api_client: Any
    kubeconfig: Path  # for programs run as subprocesses (``--kubeconfig``)
    fake: FakeApiServer | None
    prefix: str  # every Node a test makes is named with it
    run_id: str
    _made: list[str] = field(default_factory=list)
    _pods: list[tuple[str, str]] = field(default_factory=list)  # (namespace, name)

    @property
    def real(self) -> bool:
        return self.fake is None

    def core_v1(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    def make_node(
        self, suffix: str, *, labels: dict[str, str] | None = None, capacity: dict[str, str] | None = None
    ) -> str:
        """Create a Node named ``<prefix><suffix>`` through the API (on a real cluster a
        Node object without a kubelet behind it); it is deleted after the test."""
        name = self.prefix + suffix
        obj = node_object(name, labels={**(labels or {}), RUN_LABEL: self.run_id}, capacity=capacity)
        status = obj.pop("status")
        v1 = self.core_v1()
        v1.create_node(obj)
        self._made.append(name)
        # Capacity lives in status, which a create may not set on every cluster.
        v1.patch_node_status(
            name, {"status": {"capacity": status["capacity"], "allocatable": status["allocatable"]}}
        )
        return name

    def owner_ref(self, node: str) -> dict[str, str]:
        """An ownerReference to a Node, with its uid as the API server gave it: an object
        owned so lives as long as the Node (a made-up uid would have it garbage collected
        at once), and goes with it when the test's Nodes are deleted."""
        uid = self.core_v1().read_node(node).metadata.uid
        return {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}

    def make_pod(self, namespace: str, name: str, *, node: str) -> dict[str, str]:
        """Create a Pod bound to ``node`` (one of the test's Nodes, so no kubelet ever
        runs it) and owned by it; it is deleted after the test. Returns its
        ownerReference, real uid and all, for objects the Pod is to own."""
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": {RUN_LABEL: self.run_id},
                "ownerReferences": [self.owner_ref(node)],
            },
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "nfd:e2e"}]},
        }
        made = self.core_v1().create_namespaced_pod(namespace, pod)
        self._pods.append((namespace, name))
        return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": made.metadata.uid}

    def require_served(self, group: str, version: str, plural: str) -> None:
        """Skip, naming it, when the cluster does not serve a resource the test needs (a
        real cluster without nfd's CRDs); the fake serves them all."""
        if self.fake is not None:
            return
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        try:
            found = client.CustomObjectsApi(self.api_client).get_api_resources(group, version)
        except ApiException as e:
            if e.status != 404:
                raise
            found = None
        if found is None or plural not in {r.name for r in found.resources}:
            why = f"the cluster does not serve {plural}.{group}/{version} (install nfd's CRDs)"
            if os.environ.get(ENV_REQUIRED) == "1":
                pytest.fail(why, pytrace=False)
            pytest.skip(why)

    def wait_for(self, predicate: Callable[[], T], *, timeout: float = 30.0, what: str = "condition") -> T:
        """Wait until ``predicate()`` is truthy and return its value: on the fake, woken by
        each change; on a real cluster, polled every 0.2 s. TimeoutError names ``what``."""
        if self.fake is not None:
            return self.fake.wait_for(predicate, timeout=timeout, what=what)
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{what} not reached within {timeout} s")
            time.sleep(0.2)

    def labels(self, name: str) -> dict[str, str]:
        """A Node's labels, read through the API (works on both)."""
        return dict(self.core_v1().read_node(name).metadata.labels or {})

    def cleanup(self) -> None:
        from kubernetes.client.rest import ApiException

        v1 = self.core_v1()
        for namespace, pod in self._pods:
            try:
                # No kubelet runs it, so nothing waits for a grace period. The answer is
                # left unread: a Pod from a cluster, a Status from the fake.
                v1.delete_namespaced_pod(pod, namespace, grace_period_seconds=0, _preload_content=False)
            except ApiException as e:
                if e.status != 404:
                    raise
        names = set(self._made)
        try:
            names |= {
                n.metadata.name for n in v1.list_node(label_selector=f"{RUN_LABEL}={self.run_id}").items
            }
        except ApiException:
            pass
        for name in sorted(names):
            if not name.startswith(self.prefix):
                continue  # never delete what this run did not make
            try:
                v1.delete_node(name)
            except ApiException as e:
                if e.status != 404:
                    raise


def connect_real_cluster(env: Mapping[str, str]) -> tuple[Any, Path] | str | None:
    """From the environment: None (use the fake), the real cluster's ApiClient and
    kubeconfig path, or the reason the requested cluster cannot be used."""
    if env.get(ENV_REAL, "") != "1":
        return None
    path = env.get(ENV_KUBECONFIG, "")
    if not path:
        return f"{ENV_REAL}=1 but {ENV_KUBECONFIG} is not set"
    if not Path(path).is_file():
        return f"{ENV_KUBECONFIG}={path} is not a file"
    try:
        from kubernetes import client, config

        api_client = config.new_client_from_config(config_file=path)
        client.VersionApi(api_client).get_code(_request_timeout=10)
        client.CoreV1Api(api_client).list_node(limit=1, _request_timeout=10)
    except Exception as e:  # any failure means the same thing here: no usable cluster
        return f"real cluster from {ENV_KUBECONFIG}={path} is unusable: {type(e).__name__}: {e}"[:300]
    return api_client, Path(path)


@pytest.fixture(scope="session")
def _real_cluster() -> Iterator[tuple[Any, Path] | None]:
    """The real cluster when requested and reachable; None for the fake; a skip (with
    the reason) when requested but unusable."""
    found = connect_real_cluster(os.environ)
    if isinstance(found, str):
        if os.environ.get(ENV_REQUIRED) == "1":
            pytest.fail(f"{ENV_REQUIRED}=1 but {found}", pytrace=False)
        pytest.skip(found)
    try:
        yield found
    finally:
        if found is not None:
            found[0].close()


@pytest.fixture
def e2e(_real_cluster: tuple[Any, Path] | None, tmp_path: Path) -> Iterator[E2ECluster]:
    run_id = uuid.uuid4().hex[:8]
    prefix = f"nfd-e2e-{run_id}-"
    if _real_cluster is not None:
        api_client, kubeconfig = _real_cluster
        cluster = E2ECluster(api_client, kubeconfig, None, prefix, run_id)
        try:
            yield cluster
        finally:
            cluster.cleanup()
        return
    with FakeApiServer() as fake:
        api_client = fake.api_client()
        cluster = E2ECluster(api_client, fake.write_kubeconfig(tmp_path / "kubeconfig"), fake, prefix, run_id)
        try:
            yield cluster
        finally:
            cluster.cleanup()
            api_client.close()
