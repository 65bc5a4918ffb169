"""The blocking ``kubernetes`` client behind an async face: calls run in a bounded
thread pool, pass the client-side rate limit, and answer plain JSON dicts (no model
objects: they cost CPU and memory for nothing here). Errors become KubeError."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from nfd.master.ratelimit import TokenBucket
from nfd.master.settings import KubeSettings

log = logging.getLogger(__name__)

T = TypeVar("T")


class KubeError(Exception):
    """``status`` is the HTTP status, or None when the API server could not be reached
    or did not answer in time."""

    def __init__(self, status: int | None, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status in (409, 429) or self.status >= 500


class NoClusterError(Exception):
    """No kubeconfig and no in-cluster configuration."""


def load_api_client(kubeconfig: Path | None, pool_size: int) -> Any:
    """An ApiClient from ``kubeconfig``, else the in-cluster config, else $KUBECONFIG or
    ~/.kube/config. Raises NoClusterError when none exists, ValueError when the chosen
    one is unusable."""
    import os

    from kubernetes import client, config

    conf = client.Configuration()
    try:
        if kubeconfig is not None:
            config.load_kube_config(config_file=str(kubeconfig), client_configuration=conf)  # type: ignore[no-untyped-call]
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]
        else:
            default = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
            first = default.split(os.pathsep)[0]
            if not first or not os.path.exists(first):
                raise NoClusterError("no kubeconfig and no in-cluster configuration")
            config.load_kube_config(config_file=first, client_configuration=conf)  # type: ignore[no-untyped-call]
    except config.ConfigException as e:
        raise ValueError(f"kubeconfig: {e}") from None
    return make_api_client(conf, pool_size)


def make_api_client(conf: Any, pool_size: int) -> Any:
    """An ApiClient on ``conf`` (a kubernetes Configuration) with the master's pool size
    and without urllib3's own retries."""
    from kubernetes import client

    conf.connection_pool_maxsize = pool_size
    conf.retries = 0  # retries are ours: with backoff, jitter and a fresh read on 409
    return client.ApiClient(conf)


def _error(e: BaseException) -> KubeError:
    from kubernetes.client.exceptions import ApiException

    if isinstance(e, ApiException):
        retry_after = None
        headers = e.headers or {}
        ra = headers.get("Retry-After") if hasattr(headers, "get") else None
        if ra:
            try:
                retry_after = float(ra)
            except ValueError:
                retry_after = None
        msg = e.reason or ""
        if e.body:
            try:
                msg = json.loads(e.body).get("message") or msg
            except (ValueError, AttributeError):
                msg = str(e.body)[:200]
        return KubeError(int(e.status or 0) or None, f"{e.status} {msg}".strip(), retry_after)
    return KubeError(None, f"{type(e).__name__}: {e}")


class KubeApi:
    def __init__(self, api_client: Any, settings: KubeSettings) -> None:
        from kubernetes import client

        self._models = client
        self.api_client = api_client
        self.settings = settings
        self.core = client.CoreV1Api(api_client)
        self.coord = client.CoordinationV1Api(api_client)
        self.authn = client.AuthenticationV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.limiter = TokenBucket(settings.qps, settings.burst)
        # Bounded: the node workers, plus room for auth, leases and the rule watch.
        self.pool = ThreadPoolExecutor(max_workers=settings.parallelism + 6, thread_name_prefix="kube")
        self.timeout = settings.request_timeout_s
        # What CoreV1Api's patch calls ask for (they list json, yaml, protobuf, cbor).
        self._accept = api_client.select_header_accept(
            [
                "application/json",
                "application/yaml",
                "application/vnd.kubernetes.protobuf",
                "application/cbor",
            ]
        )

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        try:
            self.api_client.close()
        except Exception:  # closing a pool that never connected; nothing to lose
            pass

    async def _call(self, fn: Callable[[], Any], *, limited: bool = True) -> Any:
        if limited:
            await self.limiter.acquire()
        loop = asyncio.get_running_loop()

        def run() -> Any:
            try:
                resp = fn()
            except BaseException as e:
                raise _error(e) from None
            data = resp.data
            return json.loads(data) if data else {}

        return await loop.run_in_executor(self.pool, run)

    # -- nodes ------------------------------------------------------------------------
    async def get_node(self, name: str) -> dict[str, Any]:
        return await self._call(  # type: ignore[no-any-return]
            lambda: self.core.read_node(name, _preload_content=False, _request_timeout=self.timeout)
        )

    def _json_patch(self, resource_path: str, name: str, ops: list[dict[str, Any]]) -> Any:
        """PATCH with a JSON Patch through the client's own request building (headers,
        authentication, host) and transport, as CoreV1Api.patch_node does, minus its
        argument validation and its walk of the body through sanitize_for_serialization
        (a Python call per value; the ops are plain JSON already): about a third of the
        client's CPU per node. Answers the raw response, as ``_preload_content=False``."""
        from kubernetes.client.exceptions import ApiException

        ac = self.api_client
        method, url, headers, _, _ = ac.param_serialize(
            method="PATCH",
            resource_path=resource_path,
            path_params={"name": name},
            query_params=[],  # as the generated call passes: a query-string credential lands here
            header_params={"Accept": self._accept, "Content-Type": "application/json-patch+json"},
            auth_settings=["BearerToken"],
        )
        resp = ac.call_api(method, url, header_params=headers, body=ops, _request_timeout=self.timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response

    async def patch_node(self, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._call(  # type: ignore[no-any-return]
            lambda: self._json_patch("/api/v1/nodes/{name}", name, ops)
        )

    async def patch_node_status(self, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._call(  # type: ignore[no-any-return]
            lambda: self._json_patch("/api/v1/nodes/{name}/status", name, ops)
        )

    async def list_nodes(self, *, limit: int, cont: str | None) -> dict[str, Any]:
        def call() -> Any:
            kw: dict[str, Any] = {"limit": limit, "_preload_content": False}
            if cont:
                kw["_continue"] = cont
            return self.core.list_node(_request_timeout=max(self.timeout, 60.0), **kw)

        return await self._call(call)  # type: ignore[no-any-return]

    # -- auth -------------------------------------------------------------------------
    async def token_review(self, token: str, audiences: list[str]) -> dict[str, Any]:
        spec: dict[str, Any] = {"token": token}
        if audiences:
            spec["audiences"] = audiences
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        return await self._call(  # type: ignore[no-any-return]
            lambda: self.authn.create_token_review(
                self._models.V1TokenReview.from_dict(body),
                _preload_content=False,
                _request_timeout=self.timeout,
            )
        )

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._call(  # type: ignore[no-any-return]
            lambda: self.core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=self.timeout
            )
        )

    # -- leases (not rate limited: leadership must not starve behind node writes) ------
    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._call(  # type: ignore[no-any-return]
            lambda: self.coord.read_namespaced_lease(
                name, namespace, _preload_content=False, _request_timeout=self.timeout
            ),
            limited=False,
        )

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(  # type: ignore[no-any-return]
            lambda: self.coord.create_namespaced_lease(
                namespace,
                self._models.V1Lease.from_dict(body),
                _preload_content=False,
                _request_timeout=self.timeout,
            ),
            limited=False,
        )

    async def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._call(  # type: ignore[no-any-return]
            lambda: self.coord.replace_namespaced_lease(
                name,
                namespace,
                self._models.V1Lease.from_dict(body),
                _preload_content=False,
                _request_timeout=self.timeout,
            ),
            limited=False,
        )

    # -- rules ------------------------------------------------------------------------
    async def list_rules(self, group: str, version: str, plural: str) -> dict[str, Any]:
        return await self._call(  # type: ignore[no-any-return]
            lambda: self.custom.list_cluster_custom_object(
                group, version, plural, _preload_content=False, _request_timeout=self.timeout
            )
        )

    async def list_custom_all(
        self, group: str, version: str, plural: str, *, limit: int, cont: str | None
    ) -> dict[str, Any]:
        """One page of a custom resource across all namespaces."""
        return await self._call(  # type: ignore[no-any-return]
            lambda: self.custom.list_cluster_custom_object(
                group,
                version,
                plural,
                limit=limit,
                _continue=cont or None,
                _preload_content=False,
                _request_timeout=self.timeout,
            )
        )

    async def delete_custom(self, group: str, version: str, namespace: str, plural: str, name: str) -> None:
        await self._call(
            lambda: self.custom.delete_namespaced_custom_object(
                group, version, namespace, plural, name, _preload_content=False, _request_timeout=self.timeout
            )
        )

    async def patch_custom_status(
        self, group: str, version: str, namespace: str, plural: str, name: str, ops: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """JSON Patch on a namespaced custom object's status subresource."""
        from urllib.parse import quote

        path = f"/apis/{group}/{version}/namespaces/{quote(namespace, safe='')}/{plural}/{{name}}/status"
        return await self._call(lambda: self._json_patch(path, name, ops))  # type: ignore[no-any-return]
