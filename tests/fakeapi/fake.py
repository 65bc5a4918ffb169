"""``FakeApiServer``: the fake Kubernetes API server and the handles tests use on it.

    with FakeApiServer() as api:
        api.create_node("node-1", labels={...})
        v1 = kubernetes.client.CoreV1Api(api.api_client())
        ...
        api.faults.fail(409, verb="patch", resource="nodes")
        assert api.log.count(verb="list", resource="nodes") == 0

State helpers (``create_node``, ``node``, ``recreate_node``, ``add_pod``, ``objects``)
act on the store directly: they make the same resourceVersions and watch events an API
call would, but do not appear in the request log.
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .resources import (
    ALL_TYPES,
    NODE_FEATURE_RULES,
    PODS,
    ResourceType,
)
from .server import ServerCore
from .tokens import TokenUser

ADMIN_TOKEN = "fake-admin-token"

T = TypeVar("T")
KUBELET_LABEL_PREFIXES = ("kubernetes.io/", "beta.kubernetes.io/", "node.kubernetes.io/")
BASE_CAPACITY = {
    "cpu": "2",
    "memory": "8152872Ki",
    "pods": "110",
    "ephemeral-storage": "61255492Ki",
    "hugepages-2Mi": "0",
    "hugepages-1Gi": "0",
}


def node_object(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A Node as kubelet registers it: its standard labels, capacity and allocatable
    (extra ``labels``/``capacity`` entries are added on top)."""
    cap = {**BASE_CAPACITY, **(capacity or {})}
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", **(annotations or {})},
        },
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": cap,
            "allocatable": {**cap, **(allocatable or {})},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": "0" * 32,
                "systemUUID": "00000000-0000-0000-0000-000000000000",
                "bootID": "00000000-0000-0000-0000-000000000001",
                "kernelVersion": "6.1.0-fake",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.33.0",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }
    return obj


class Objects:
    """Direct access to stored objects of any type the fake serves, by plural
    (``nodes``, ``pods``, ``leases``, ``nodefeaturerules``, ...). Objects come back as
    private copies."""

    def __init__(self, core: ServerCore) -> None:
        self._store = core.store

    @staticmethod
    def type(plural: str) -> ResourceType:
        for t in ALL_TYPES:
            if plural in (t.plural, t.key):
                return t
        raise KeyError(f"the fake does not serve {plural!r}")

    def get(self, plural: str, name: str, namespace: str = "") -> dict[str, Any]:
        return json.loads(self._store.get(self.type(plural), namespace, name).raw)

    def exists(self, plural: str, name: str, namespace: str = "") -> bool:
        try:
            self.get(plural, name, namespace)
        except Exception:
            return False
        return True

    def list(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        items, _ = self._store.list(self.type(plural), namespace)
        return [json.loads(s.raw) for s in items]

    def create(self, plural: str, obj: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        rt = self.type(plural)
        ns = namespace or (obj.get("metadata") or {}).get("namespace", "") if rt.namespaced else ""
        return json.loads(self._store.create(rt, ns, obj).raw)

    def modify(
        self,
        plural: str,
        name: str,
        change: Callable[[dict[str, Any]], Any],
        namespace: str = "",
        *,
        subresource: str = "",
    ) -> dict[str, Any]:
        """``change`` edits the object in place (or returns a replacement). Status is kept
        unless ``subresource="status"``, as over the API."""

        def apply(obj: dict[str, Any]) -> dict[str, Any]:
            out = change(obj)
            return obj if out is None else out

        return copy.deepcopy(
            self._store.update(self.type(plural), namespace, name, apply, subresource=subresource).obj
        )

    def set(self, plural: str, obj: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        """Store ``obj`` as is, status included (unconditionally; create if missing)."""
        rt = self.type(plural)
        meta = obj.get("metadata") or {}
        ns = namespace or meta.get("namespace", "") if rt.namespaced else ""
        if not self.exists(plural, meta.get("name", ""), ns):
            return self.create(plural, obj, ns)
        body = copy.deepcopy(obj)
        body.setdefault("metadata", {}).pop("resourceVersion", None)
        self._store.update(rt, ns, meta["name"], lambda _c: copy.deepcopy(body))
        if "status" in rt.subresources and "status" in obj:
            self._store.update(rt, ns, meta["name"], lambda _c: copy.deepcopy(body), subresource="status")
        return self.get(plural, meta["name"], ns)

    def delete(self, plural: str, name: str, namespace: str = "") -> None:
        self._store.delete(self.type(plural), namespace, name)


class FakeApiServer(ServerCore):
    """The fake API server. ``start()`` (or ``with``) serves it on 127.0.0.1:<ephemeral>."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_audiences: tuple[str, ...] | None = None,
        watch_history: int = 20_000,
        log_keep: int = 500_000,
    ) -> None:
        """``watch_history``: changes kept for watches to resume from (older
        resourceVersions get 410 Expired, as from the API server's watch cache);
        ``log_keep``: request records kept."""
        super().__init__(
            host=host, port=port, api_audiences=api_audiences, watch_history=watch_history, log_keep=log_keep
        )
        self.objects = Objects(self)

    def __enter__(self) -> FakeApiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> FakeApiServer:
        super().start()
        return self

    def wait_for(self, predicate: Callable[[], T], *, timeout: float = 10.0, what: str = "condition") -> T:
        """Wait until ``predicate()`` returns something truthy and return it. It is
        re-evaluated on every store change and at least every 50 ms (so it may look at
        the request log too). Raises TimeoutError naming ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            rv = self.store.resource_version
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what} not reached within {timeout} s")
            self.store.wait_beyond(rv, min(remaining, 0.05))

    # -- clients ----------------------------------------------------------------------

    def configuration(self, token: str | None = None) -> Any:
        """A ``kubernetes.client.Configuration`` for this server (plain HTTP)."""
        from kubernetes import client

        conf = client.Configuration(host=self.url)
        if token:
            conf.api_key = {"BearerToken": token}
            conf.api_key_prefix = {"BearerToken": "Bearer"}
        return conf

    def api_client(self, token: str | None = None) -> Any:
        """A real ``kubernetes.client.ApiClient`` talking to this server."""
        from kubernetes import client

        return client.ApiClient(self.configuration(token))

    def transport(self, token: str | None = None, *, timeout: float = 30.0) -> Any:
        """``nfd.kube``'s light transport (the per-node agents') talking to this server."""
        from nfd.kube.config import Credentials
        from nfd.kube.light import LightTransport

        return LightTransport(Credentials(self.url, token=token), timeout=timeout)

    def admin_token(self) -> str:
        """A token for a cluster administrator (``system:masters``), registered here."""
        if self.tokens.lookup(ADMIN_TOKEN) is None:
            self.tokens.add(
                ADMIN_TOKEN, TokenUser("kubernetes-admin", groups=("system:masters", "system:authenticated"))
            )
        return ADMIN_TOKEN

    def write_kubeconfig(self, path: str | os.PathLike[str], *, token: str | None = None) -> Path:
        """A kubeconfig for this server, for programs run as subprocesses
        (``nfd master --kubeconfig PATH``); the admin token unless ``token`` is given.
        JSON is valid YAML, so no YAML writer is needed."""
        token = token or self.admin_token()
        out = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }
        out.write_text(json.dumps(config, indent=2))
        return out

    # -- nodes --------------------------------------------------------------------------

    def create_node(self, name: str, **fields: Any) -> dict[str, Any]:
        """Register a Node as kubelet would; keyword arguments as for ``node_object``."""
        return self.objects.create("nodes", node_object(name, **fields))

    def node(self, name: str) -> dict[str, Any]:
        return self.objects.get("nodes", name)

    def nodes(self) -> list[dict[str, Any]]:
        return self.objects.list("nodes")

    def labels(self, name: str) -> dict[str, str]:
        return dict(self.node(name)["metadata"].get("labels") or {})

    def annotations(self, name: str) -> dict[str, str]:
        return dict(self.node(name)["metadata"].get("annotations") or {})

    def capacity(self, name: str) -> dict[str, str]:
        return dict((self.node(name).get("status") or {}).get("capacity") or {})

    def delete_node(self, name: str) -> None:
        self.objects.delete("nodes", name)

    def recreate_node(self, name: str) -> dict[str, Any]:
        """Delete the Node and register it again as kubelet does after a node object is
        lost: a new uid, only kubelet's own labels, base capacity (extended resources and
        other writers' labels and annotations gone). Watches see DELETED then ADDED."""
        old = self.node(name)
        kept = {
            k: v
            for k, v in (old["metadata"].get("labels") or {}).items()
            if k.startswith(KUBELET_LABEL_PREFIXES)
        }
        self.delete_node(name)
        obj = node_object(name)
        obj["metadata"]["labels"] = kept or obj["metadata"]["labels"]
        return self.objects.create("nodes", obj)

    def kubelet_sync(self, name: str) -> dict[str, Any]:
        """What kubelet's next status update does with extended resources someone added to
        ``status.capacity``: copies them to ``status.allocatable`` (and drops allocatable
        entries no longer in capacity)."""

        def sync(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            cap = status.get("capacity") or {}
            alloc = {k: v for k, v in (status.get("allocatable") or {}).items() if k in cap or "/" not in k}
            alloc.update({k: v for k, v in cap.items() if "/" in k})
            status["allocatable"] = alloc

        return self.objects.modify("nodes", name, sync, subresource="status")

    # -- pods, tokens, leases, rules ----------------------------------------------------

    def add_pod(
        self,
        namespace: str,
        name: str,
        *,
        node_name: str,
        uid: str | None = None,
        labels: dict[str, str] | None = None,
        service_account: str = "default",
    ) -> dict[str, Any]:
        pod = {
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {
                "nodeName": node_name,
                "serviceAccountName": service_account,
                "containers": [{"name": "main", "image": "nfd:test"}],
            },
            "status": {"phase": "Running"},
        }
        if uid:  # a pod uid chosen by the test, to match a token's pod-uid
            pod["metadata"]["uid"] = uid
        return copy.deepcopy(self.store.create(PODS, namespace, pod, keep_uid=True).obj)

    def issue_worker_token(
        self,
        node_name: str,
        *,
        namespace: str = "node-feature-discovery",
        service_account: str = "nfd-worker",
        bind_node: bool = True,
        pod_name: str | None = None,
        audiences: tuple[str, ...] = (),
    ) -> str:
        """A token as a worker pod on ``node_name`` gets; its pod is added when missing.
        ``bind_node=False``: a cluster that does not put the node name in tokens (the
        master must look the pod up)."""
        pod_name = pod_name or f"nfd-worker-{node_name}"
        if not self.objects.exists("pods", pod_name, namespace):
            self.add_pod(namespace, pod_name, node_name=node_name, service_account=service_account)
        pod = self.objects.get("pods", pod_name, namespace)
        node_uid = (
            self.node(node_name)["metadata"]["uid"] if self.objects.exists("nodes", node_name) else None
        )
        return self.tokens.issue_service_account(
            namespace,
            service_account,
            pod_name=pod_name,
            pod_uid=pod["metadata"]["uid"],
            node_name=node_name if bind_node else None,
            node_uid=node_uid,
            audiences=audiences,
        )

    def lease(self, name: str, namespace: str) -> dict[str, Any]:
        return self.objects.get("leases", name, namespace)

    def create_rule(self, name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
        return self.objects.create(
            "nodefeaturerules",
            {
                "apiVersion": f"{NODE_FEATURE_RULES.api_version}",
                "kind": "NodeFeatureRule",
                "metadata": {"name": name},
                "spec": {"rules": rules},
            },
        )


__all__ = ["FakeApiServer", "Objects", "node_object"]
