"""The small interface both transports answer (``light``: the stdlib's http.client, for
the per-node agents; ``heavy``: the ``kubernetes`` package's ApiClient, for the master),
and what they share: request paths, and counting each request by verb, resource and
code."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlsplit

if TYPE_CHECKING:
    from nfd.kube.config import Credentials

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
# What quote() leaves as it is (RFC 3986's unreserved characters): most parts of a path
# ("apis", "resource.k8s.io", a name) need no quoting, and a match costs less.
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")

# verb, resource, code ("200", "404", "unreachable"): the request counter's labels.
Count = Callable[[str, str, str], None]


class Transport(Protocol):
    creds: Credentials  # who we are to the server (its current token: ``creds.bearer()``)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The decoded JSON answer to ``method path`` (``body`` sent as JSON, ``headers``
        added to ours); an ``nfd.kube.errors.ApiError`` for an error status or no answer."""
        ...

    def watch(self, path: str, *, timeout: float) -> Iterator[dict[str, Any]]:
        """The events of a watch request, one decoded JSON line each, until the server
        ends it; ApiError when it cannot start or breaks. ``timeout``: a stream silent
        that long is broken."""
        ...

    def abort(self) -> None:
        """Stopping: the requests and watches under way fail at once, and so does every
        later one."""
        ...

    def close(self) -> None: ...


def path(*parts: str, **query: str) -> str:
    """``/api/v1/nodes/x?fieldSelector=...``: each part and value quoted; empty query
    values left out."""
    out = "/" + "/".join(p if _UNRESERVED.fullmatch(p) else quote(p, safe="") for p in parts)
    q = "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items() if v)
    return f"{out}?{q}" if q else out


def classify(method: str, url: str) -> tuple[str, str]:
    """(verb, resource) of an API request, as the API server's audit log names them:
    ``("patch", "nodes/status")``, ``("watch", "nodefeaturerules")``."""
    split = urlsplit(url)
    parts = [p for p in split.path.split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return method.lower(), "/".join(parts[:1]) or "/"
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    resource = rest[0] if rest else ""
    if len(rest) >= 3:
        resource += "/" + rest[2]
    named = len(rest) >= 2
    if method == "GET":
        query = split.query.lower()
        verb = "get" if named else ("watch" if "watch=true" in query or "watch=1" in query else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method)
    return verb, resource


def counted(count: Count | None, method: str, url: str, code: int | None) -> None:
    if count is not None:
        count(*classify(method, url), str(code) if code else "unreachable")


def request_name(method: str, path: str) -> str:
    """A request as errors name it, its query left out: ``GET /api/v1/nodes/x``; a watch
    is ``watch /api/v1/nodes``."""
    return f"{'watch' if method == 'WATCH' else method} {path.split('?')[0]}"


def with_query(url: str, query: Mapping[str, str]) -> str:
    q = "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items() if v)
    if not q:
        return url
    return f"{url}&{q}" if "?" in url else f"{url}?{q}"
