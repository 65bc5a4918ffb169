"""The blocking ``kubernetes`` client behind an async face: calls run in a bounded
thread pool, pass the client-side rate limit, and answer plain JSON dicts (no model
objects: they cost CPU and memory for nothing here). Errors become the typed
exceptions of ``nfd.kube.errors``; every request is counted by verb and resource."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from pydantic_core import to_json

from nfd.daemonpool import DaemonPool
from nfd.kube.aio import Connections
from nfd.kube.errors import TooManyRequests, Unreachable, from_response
from nfd.kube.heavy import from_exception, send, serialize, tls_context
from nfd.kube.ratelimit import AdaptiveRate
from nfd.kube.transport import JSON_PATCH, MERGE_PATCH, Count, counted, path
from nfd.kube.wire import ProtocolError
from nfd.master.core import nodeview
from nfd.master.core.settings import KubeSettings

if TYPE_CHECKING:
    from nfd.master.core.metrics import Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")
# A JSON Patch (its ops) or a JSON Merge Patch (the document to merge).
Patch = list[dict[str, Any]] | dict[str, Any]


_PLURALS = {"secret": "secrets", "configmap": "configmaps"}
WATCH_TIMEOUT_S = 300  # the server ends a watch after this; it resumes at once


@dataclass(frozen=True)
class Resource:
    """A collection the master lists and watches: a custom resource across all
    namespaces (``group`` set), or core v1 ``nodes``, or ``pods`` in ``namespace``;
    narrowed by the selectors set."""

    plural: str
    group: str = ""
    version: str = "v1"
    namespace: str = ""
    field_selector: str = ""
    label_selector: str = ""

    def path(self) -> str:
        """The collection's path, which lists it (and watches it with ``watch=true``)."""
        if self.group:
            return path("apis", self.group, self.version, self.plural)
        if self.plural == "nodes":
            return path("api", "v1", "nodes")
        if self.plural == "pods" and self.namespace:
            return path("api", "v1", "namespaces", self.namespace, "pods")
        raise ValueError(f"no list call for {self}")

    def query(self) -> dict[str, str]:
        return {"fieldSelector": self.field_selector, "labelSelector": self.label_selector}


NODES = Resource("nodes")


class KubeApi:
    def __init__(self, api_client: Any, settings: KubeSettings, metrics: Metrics | None = None) -> None:
        self._count: Count | None = None
        if metrics is not None:
            counter = metrics.api_requests
            self._count = lambda verb, resource, code: counter.labels(
                verb=verb, resource=resource, code=code
            ).inc()

        self.api_client = api_client
        self.settings = settings
        self.limiter = AdaptiveRate(
            settings.qps,
            settings.burst,
            max_in_flight=settings.parallelism,
            min_qps=settings.min_qps,
            slow_s=settings.slow_request_s,
        )
        if metrics is not None:
            metrics.api_window.set_function(lambda: self.limiter.window)
        # Bounded: the limiter's window at its ceiling, plus room for the calls outside
        # it (leases, the serving certificate's objects) and the watches' LISTs.
        # Daemon threads: a call the API server does not answer (a LIST may take a
        # minute) must not keep a stopped master alive.
        self.pool = DaemonPool(settings.parallelism + 6, "kube")
        self.timeout = settings.request_timeout_s
        self._writes: Connections | None = None  # made on the event loop, at the first write

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        if self._writes is not None:
            self._writes.close()
        try:
            self.api_client.close()
        except Exception:  # closing a pool that never connected; nothing to lose
            pass

    async def _call(
        self,
        fn: Callable[[], Any],
        *,
        limited: bool = True,
        write: bool = False,
        decode: Callable[[bytes], Any] = json.loads,
    ) -> Any:
        """``limited``: within the limiter's rate; ``write``: a write, within its window
        too, whose latency steers it. ``decode``: the answer's JSON to Python."""
        return await self._limited(lambda: self._send(fn, decode), limited=limited, write=write)

    async def _limited(self, send: Callable[[], Awaitable[T]], *, limited: bool, write: bool) -> T:
        if not limited:
            return await send()
        await self.limiter.acquire(write=write)
        try:
            t0 = time.monotonic()
            try:
                out = await send()
            except TooManyRequests:
                self.limiter.throttled()
                raise
            self.limiter.answered(time.monotonic() - t0, write=write)
            return out
        finally:
            if write:
                self.limiter.release()

    async def _send(self, fn: Callable[[], Any], decode: Callable[[bytes], Any]) -> Any:
        loop = asyncio.get_running_loop()

        def run() -> Any:
            try:
                resp = fn()
            except BaseException as e:
                raise from_exception(e) from None
            data = resp.data
            return decode(data) if data else {}

        return await loop.run_in_executor(self.pool, run)

    def _request(
        self, method: str, resource_path: str, query: dict[str, str] | None = None, *, body: Any = None,
        timeout: Any = None,
    ) -> Any:  # fmt: skip
        """Blocking (the pool's): ``heavy.send`` of one request, counted; the raw response,
        its body unread."""
        timeout = self.timeout if timeout is None else timeout
        return send(
            self.api_client, method, resource_path, query, body=body, timeout=timeout, count=self._count
        )

    # -- nodes ------------------------------------------------------------------------
    async def get_node(self, name: str) -> dict[str, Any]:
        return await self._call(lambda: self._request("GET", path("api", "v1", "nodes", name)))  # type: ignore[no-any-return]

    async def _patch(self, resource_path: str, patch: Patch, decode: Callable[[bytes], T]) -> T:
        """PATCH with a JSON Patch (a list of ops) or a JSON Merge Patch (a dict), sent on
        the event loop (``nfd.kube.aio``): the request built by the client (URL, headers,
        credentials) as every other, without the client's walk of the body through
        sanitize_for_serialization (a Python call per value; the body is plain JSON
        already); the body encoded by pydantic-core, compact (json.dumps took 3-5 times
        the CPU, and a twentieth more bytes for the server). Counted as the rest
        are; ``decode`` of the answer's body."""
        kind = JSON_PATCH if isinstance(patch, list) else MERGE_PATCH
        method, url, headers = serialize(self.api_client, "PATCH", resource_path, content_type=kind)
        if self._writes is None:
            self._writes = Connections(self.api_client.configuration.host, tls_context(self.api_client))
        u = urlsplit(url)
        target = f"{u.path}?{u.query}" if u.query else u.path
        try:
            reply = await self._writes.request(method, target, headers, to_json(patch), self.timeout or None)
        except (OSError, TimeoutError, ProtocolError) as e:
            counted(self._count, method, url, None)
            raise Unreachable(None, f"{method} {resource_path}: {type(e).__name__}: {e}") from None
        counted(self._count, method, url, reply.status)
        if not 200 <= reply.status <= 299:
            raise from_response(reply.status, reply.body, reply.retry_after, f"{method} {target}")
        return decode(reply.body) if reply.body else {}  # type: ignore[return-value]  # as _send answers

    async def patch_node(self, name: str, patch: Patch, keep: Callable[[dict[str, Any]], T]) -> T:
        """``keep`` of the Node written (as ``nodeview.node`` parses it), taken as soon as
        the answer is parsed, so the parsed Node is let go at once: with 64 writes in
        flight, parsed Nodes held meanwhile leave free room in Python's arenas that stays
        (docs/perf.md, "The master at scale")."""
        return await self._limited(
            lambda: self._patch(
                path("api", "v1", "nodes", name), patch, lambda data: keep(nodeview.node(data))
            ),
            limited=True,
            write=True,
        )

    async def patch_node_status(self, name: str, patch: Patch, keep: Callable[[dict[str, Any]], T]) -> T:
        """As ``patch_node``, on the status subresource."""
        return await self._limited(
            lambda: self._patch(
                path("api", "v1", "nodes", name, "status"), patch, lambda data: keep(nodeview.node(data))
            ),
            limited=True,
            write=True,
        )

    # -- auth -------------------------------------------------------------------------
    async def token_review(self, token: str, audiences: list[str]) -> dict[str, Any]:
        spec: dict[str, Any] = {"token": token}
        if audiences:
            spec["audiences"] = audiences
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        return await self._call(  # type: ignore[no-any-return]
            lambda: self._request(
                "POST", path("apis", "authentication.k8s.io", "v1", "tokenreviews"), body=body
            )
        )

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._call(  # type: ignore[no-any-return]
            lambda: self._request("GET", path("api", "v1", "namespaces", namespace, "pods", name))
        )

    async def subject_access_review(self, spec: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        return await self._call(  # type: ignore[no-any-return]
            lambda: self._request(
                "POST", path("apis", "authorization.k8s.io", "v1", "subjectaccessreviews"), body=body
            )
        )

    # -- the serving certificate's Secret and CA ConfigMap (read and written before the
    # server starts, on another event loop: not rate limited, whose lock is the server's) --
    async def read_object(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        """A Secret or ConfigMap (``kind`` "secret" or "configmap")."""
        where = path("api", "v1", "namespaces", namespace, _PLURALS[kind], name)
        return await self._call(lambda: self._request("GET", where), limited=False)  # type: ignore[no-any-return]

    async def create_object(self, kind: str, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        where = path("api", "v1", "namespaces", namespace, _PLURALS[kind])
        return await self._call(lambda: self._request("POST", where, body=body), limited=False)  # type: ignore[no-any-return]

    async def replace_object(
        self, kind: str, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """PUT with the body's resourceVersion: 409 when someone wrote in between."""
        where = path("api", "v1", "namespaces", namespace, _PLURALS[kind], name)
        return await self._call(lambda: self._request("PUT", where, body=body), limited=False)  # type: ignore[no-any-return]

    # -- leases (not rate limited: leadership must not starve behind node writes) ------
    async def get_lease(self, namespace: str, name: str) -> dict[str, Any]:
        where = _leases(namespace, name)
        return await self._call(lambda: self._request("GET", where), limited=False)  # type: ignore[no-any-return]

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        where = _leases(namespace)
        return await self._call(lambda: self._request("POST", where, body=body), limited=False)  # type: ignore[no-any-return]

    async def replace_lease(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        where = _leases(namespace, name)
        return await self._call(lambda: self._request("PUT", where, body=body), limited=False)  # type: ignore[no-any-return]

    # -- collections, listed and watched (``nfd.master.core.watch``) --------------------------
    async def list_page(self, res: Resource, *, limit: int, cont: str | None) -> dict[str, Any]:
        """One page of a paginated LIST of ``res``; a page of Nodes parsed for what the
        master reads of them (``nodeview``: every Node's managedFields, images and
        conditions left unparsed, as in a write's answer and a watch event)."""
        where, query = res.path(), {**res.query(), "limit": str(limit), "continue": cont or ""}
        return await self._call(  # type: ignore[no-any-return]
            lambda: self._request("GET", where, query, timeout=max(self.timeout, 60.0)),
            decode=nodeview.page if res.plural == "nodes" and not res.group else json.loads,
        )

    async def pages(self, res: Resource, *, limit: int) -> AsyncIterator[dict[str, Any]]:
        """Every page of a paginated LIST of ``res``, in order."""
        cont: str | None = None
        while True:
            page = await self.list_page(res, limit=limit, cont=cont)
            yield page
            cont = (page.get("metadata") or {}).get("continue") or None
            if not cont:
                return

    def open_watch(self, res: Resource, resource_version: str) -> Any:
        """Blocking (the watch thread's): a watch of ``res`` from ``resource_version``, with
        bookmarks, as the raw response whose body is one JSON event a line."""
        query = {
            **res.query(),
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_TIMEOUT_S),
        }
        # a stream gone silent (a dead connection) ends rather than hang
        return self._request("WATCH", res.path(), query, timeout=(10, WATCH_TIMEOUT_S + 30))

    async def delete_custom(self, group: str, version: str, namespace: str, plural: str, name: str) -> None:
        """Deletes a custom or built-in object of an API group; ``namespace`` empty: a
        cluster-scoped one."""
        scope = ("namespaces", namespace) if namespace else ()
        where = path("apis", group, version, *scope, plural, name)
        await self._call(lambda: self._request("DELETE", where))

    async def patch_custom_status(
        self, group: str, version: str, namespace: str, plural: str, name: str, ops: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """JSON Patch on a namespaced custom object's status subresource."""
        where = path("apis", group, version, "namespaces", namespace, plural, name, "status")
        return await self._limited(
            lambda: self._patch(where, ops, lambda data: json.loads(data) if data else {}),
            limited=True,
            write=True,
        )


def _leases(namespace: str, *name: str) -> str:
    return path("apis", "coordination.k8s.io", "v1", "namespaces", namespace, "leases", *name)
