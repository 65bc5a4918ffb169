"""HTTP front of the fake API server: routing, verbs, watch streams, faults, request log.

HTTP/1.1 with keep-alive on a ThreadingHTTPServer (one thread per connection), bound to
127.0.0.1 and an ephemeral port. Each response goes out in one write (TCP_NODELAY), so
keep-alive clients never wait on delayed ACKs.
"""

from __future__ import annotations

import base64
import json
import select
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from . import patch as patches
from .authz import Authorizer
from .errors import ApiError, bad_request, method_not_allowed, unsupported_media_type
from .faults import Faults
from .gc import GarbageCollector
from .requestlog import RequestLog, RequestRecord
from .resources import BY_PATH, JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, ResourceType
from .selectors import field_matcher, label_matcher
from .store import Store, Stored
from .tokens import TokenRegistry


def _no_such_path() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", details={})


VERSION_INFO = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.0-fake",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
TOKEN_REVIEW_API = "authentication.k8s.io/v1"
MAX_JSON_PATCH_OPS = 10000
_REVIEWS = {
    "tokenreviews": "tokenreviews.authentication.k8s.io",
    "subjectaccessreviews": "subjectaccessreviews.authorization.k8s.io",
    "proxy": "services",  # services/{name}/proxy/...: the service proxy
}
# What the service proxy never passes on: the caller's credential (the API server drops
# Authorization once it has authenticated the request) and impersonation.
_PROXY_DROPS = ("authorization", "impersonate-", "host", "content-length", "connection")
# Paths anyone may read (the system:public-info-viewer role).
_PUBLIC = frozenset({"version", "healthz", "readyz", "livez"})


class _Route:
    __slots__ = ("name", "namespace", "rt", "special", "subresource", "tail", "verb")

    def __init__(self) -> None:
        self.verb = ""
        self.rt: ResourceType | None = None
        self.namespace = ""
        self.name = ""
        self.subresource = ""
        self.special = ""  # non-resource endpoints and tokenreviews
        self.tail = ""  # the service proxy: the path after .../proxy

    @property
    def resource(self) -> str:
        if self.rt is not None:
            return self.rt.key
        return _REVIEWS.get(self.special, "")


def _route(method: str, path: str, query: dict[str, list[str]]) -> _Route:
    r = _Route()
    parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
    if len(parts) == 1 and parts[0] in ("version", "healthz", "readyz", "livez"):
        r.special = parts[0]
        r.verb = "get"
        return r
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise _no_such_path()
    if (group, version, rest) in (
        ("authentication.k8s.io", "v1", ["tokenreviews"]),
        ("authorization.k8s.io", "v1", ["subjectaccessreviews"]),
    ):
        r.special, r.verb = rest[0], "create"
        if method != "POST":
            raise method_not_allowed()
        return r
    if len(rest) >= 3 and rest[0] == "namespaces":
        r.namespace, rest = rest[1], rest[2:]
    if group == "" and len(rest) >= 3 and rest[0] == "services" and rest[2] == "proxy" and r.namespace:
        r.special, r.name, r.subresource = "proxy", rest[1], "proxy"
        r.tail = "/" + "/".join(rest[3:])
        r.verb = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
            method, ""
        )
        if not r.verb:
            raise method_not_allowed()
        return r
    if not rest or len(rest) > 3:
        raise _no_such_path()
    rt = BY_PATH.get((group, version, rest[0]))
    if rt is None:
        raise _no_such_path()
    r.rt = rt
    if len(rest) >= 2:
        r.name = rest[1]
    if len(rest) == 3:
        if rest[2] not in rt.subresources:
            raise _no_such_path()
        r.subresource = rest[2]
    if rt.namespaced and r.name and not r.namespace:
        raise _no_such_path()
    if not rt.namespaced and r.namespace:
        raise _no_such_path()
    watch = (query.get("watch") or [""])[0] in ("true", "1")
    if r.name:
        r.verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
    else:
        r.verb = {"GET": "watch" if watch else "list", "POST": "create", "DELETE": "deletecollection"}.get(
            method, ""
        )
    if not r.verb:
        raise method_not_allowed()
    if r.subresource and r.verb not in ("get", "update", "patch"):
        raise method_not_allowed()
    return r


def _status_success(rt: ResourceType, stored: Stored) -> dict[str, Any]:
    details: dict[str, Any] = {"name": stored.obj["metadata"]["name"]}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    details["uid"] = stored.obj["metadata"]["uid"]
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def _encode_continue(name: str, namespace: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([namespace, name]).encode()).decode()


def _decode_continue(token: str) -> tuple[str, str]:
    try:
        ns, name = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(ns), str(name)
    except (ValueError, TypeError):
        raise bad_request(f"continue key is not valid: {token}") from None


class _Headers(dict[str, str]):
    """Request headers by lower-cased name (what the handler needs of email.Message,
    without its parsing cost)."""

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return dict.__getitem__(self, key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and dict.__contains__(self, key.lower())


_MAX_HEADERS = 100


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def parse_request(self) -> bool:
        """The request line and headers, parsed directly (http.server's email-based
        parser costs more than everything else the fake does for a GET)."""
        line = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        self.requestline = line
        parts = line.split()
        if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
            self.request_version = "HTTP/1.0"  # answer with a status line, then close
            self.close_connection = True
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request line {line!r}")
            return False
        self.command, self.path, self.request_version = parts
        headers = _Headers()
        for _ in range(_MAX_HEADERS + 1):
            raw = self.rfile.readline(65537)
            if len(raw) > 65536:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Header line too long")
                return False
            if raw in (b"\r\n", b"\n", b""):
                break
            name, sep, value = str(raw, "iso-8859-1").partition(":")
            if not sep:
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad header line {raw!r}")
                return False
            headers[name.strip().lower()] = value.strip()
        else:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Too many headers")
            return False
        self.headers = headers  # type: ignore[assignment]
        conn = headers.get("connection", "").lower()
        self.close_connection = conn == "close" or (
            self.request_version == "HTTP/1.0" and conn != "keep-alive"
        )
        return True

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log records what matters

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = lambda self: self._serve()

    # -- plumbing ---------------------------------------------------------------------

    def _send(
        self, code: int, body: bytes, headers: dict[str, str] | None = None, ctype: str = "application/json"
    ) -> None:
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = ""
        head = [
            f"HTTP/1.1 {code} {phrase}",
            f"Content-Type: {ctype}",
            f"Content-Length: {len(body)}",
            "Cache-Control: no-cache, private",
        ]
        for k, v in (headers or {}).items():
            head.append(f"{k}: {v}")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)

    def _user(self) -> tuple[str | None, list[str]]:
        """The username and groups the request's bearer token stands for, if the registry
        knows it."""
        auth = self.headers.get("Authorization") or ""
        if not auth.startswith("Bearer "):
            return None, []
        status = self.server.fake.tokens.review({"token": auth[7:].strip()})
        if not status.get("authenticated"):
            return None, []
        return status["user"]["username"], list(status["user"].get("groups") or [])

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True  # the stream cannot be trusted past this request
            return b""
        return self.rfile.read(length) if length > 0 else b""

    def _drop_connection(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _serve(self) -> None:
        fake = self.server.fake
        started = time.perf_counter()
        seq = fake.log.next_seq()
        url = urlsplit(self.path)
        method = self.command
        query = parse_qs(url.query, keep_blank_values=True)
        body = self._read_body()
        route = _Route()
        logged = False
        user, groups = self._user()

        def record(status: int) -> None:
            # Logged before the answer goes out, so a client that got its answer finds
            # its request in the log.
            nonlocal logged
            if logged:
                return
            logged = True
            fake.log.add(
                RequestRecord(
                    seq=seq,
                    method=method,
                    path=url.path,
                    query=url.query,
                    verb=route.verb,
                    resource=route.resource,
                    subresource=route.subresource,
                    namespace=route.namespace,
                    name=route.name,
                    status=status,
                    content_type=self.headers.get("Content-Type") or "",
                    user=user or "",
                    duration=time.perf_counter() - started,
                )
            )

        try:
            if fake.faults.down_mode() == "reset":
                record(0)
                self._drop_connection()
                return
            try:
                route = _route(method, url.path, query)
                if fake.require_auth and user is None and route.special not in _PUBLIC:
                    raise ApiError(401, "Unauthorized")
                if fake.enforce_rbac and user is not None and route.special not in _PUBLIC:
                    fake.authz.enforce(
                        user, groups, verb=route.verb, resource=route.resource, subresource=route.subresource,
                        namespace=route.namespace, name=route.name,
                    )  # fmt: skip
                delay, injected = fake.faults.take(
                    method, url.path, route.verb, route.resource, route.subresource
                )
                if delay:
                    time.sleep(delay)
                if fake.faults.down_mode() == "503":
                    injected = ApiError(
                        503,
                        "the server is currently unable to handle the request (down)",
                    )
                if injected is not None:
                    raise injected
                if query.get("dryRun") and route.verb in (
                    "create",
                    "update",
                    "patch",
                    "delete",
                    "deletecollection",
                ):
                    # Refused loudly rather than written for real.
                    raise bad_request("dryRun is not implemented by this fake API server")
                if route.verb == "watch":
                    self._watch(route, query, lambda: record(200))
                    return
                status, payload, extra = self._handle(route, method, query, body)
                if isinstance(payload, bytes):
                    ctype = "text/plain; charset=utf-8" if route.special.endswith("z") else "application/json"
                else:
                    payload, ctype = json.dumps(payload, separators=(",", ":")).encode(), "application/json"
                record(status)
                self._send(status, payload, extra, ctype)
            except ApiError as e:
                record(e.code)
                self._send(e.code, json.dumps(e.status).encode(), e.headers)
            except Exception as e:  # a bug of the fake's: answer as the API server's panic handler
                err = ApiError(500, f"Internal error occurred: {type(e).__name__}: {e}")
                record(500)
                self._send(500, json.dumps(err.status).encode())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            record(0)

    # -- verbs ------------------------------------------------------------------------

    def _handle(
        self, route: _Route, method: str, query: dict[str, list[str]], body: bytes
    ) -> tuple[int, dict[str, Any] | bytes, dict[str, str] | None]:
        fake = self.server.fake
        if route.special == "version":
            return 200, VERSION_INFO, None
        if route.special in ("healthz", "readyz", "livez"):
            return 200, b"ok", None
        if route.special == "tokenreviews":
            return self._token_review(body)
        if route.special == "subjectaccessreviews":
            return 201, fake.authz.review(self._json_object(body)), None
        if route.special == "proxy":
            return self._proxy(route, method, query, body)
        rt = route.rt
        assert rt is not None
        store = fake.store
        ns = route.namespace
        if route.verb == "get":
            stored = store.get(rt, ns, route.name)
            return 200, stored.raw, None
        if route.verb == "list":
            return 200, self._list(rt, ns, query), None
        if route.verb == "create":
            obj = self._json_object(body)
            self._check_kind(rt, obj)
            if rt.namespaced and (obj.get("metadata") or {}).get("namespace") not in (None, "", ns):
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            return 201, store.create(rt, ns, obj).raw, None
        if route.verb == "update":
            obj = self._json_object(body)
            self._check_kind(rt, obj)
            name = (obj.get("metadata") or {}).get("name")
            if name != route.name:
                raise bad_request(
                    f"the name of the object ({name}) does not match the name on the URL ({route.name})"
                )
            stored = store.update(
                rt, ns, route.name, lambda _cur: obj, subresource=route.subresource, require_rv=rt.custom
            )
            return 200, stored.raw, None
        if route.verb == "patch":
            return 200, self._patch(rt, route, body).raw, None
        if route.verb == "delete":
            opts = self._json_object(body) if body.strip() else {}
            pre = (opts.get("preconditions") or {}) if isinstance(opts, dict) else {}
            if opts.get("propagationPolicy") not in (None, "Background") or opts.get("orphanDependents"):
                # Only the garbage collector's background deletion of dependents is here.
                raise bad_request("only propagationPolicy Background is implemented by this fake API server")
            gone = store.delete(
                rt, ns, route.name, uid=pre.get("uid"), resource_version=pre.get("resourceVersion")
            )
            return 200, _status_success(rt, gone), None
        if route.verb == "deletecollection":
            items, _ = store.list(rt, ns or None, self._matcher(rt, query))
            for s in items:
                meta = s.obj["metadata"]
                try:
                    store.delete(rt, meta.get("namespace", ""), meta["name"])
                except ApiError:
                    pass  # deleted meanwhile
            return 200, self._list_body(rt, [s.item_raw for s in items], store.resource_version, ""), None
        raise method_not_allowed()

    def _proxy(
        self, route: _Route, method: str, query: dict[str, list[str]], body: bytes
    ) -> tuple[int, bytes, dict[str, str] | None]:
        """The service proxy: the request to the backend ``service_backends`` names for
        ``[scheme:]name[:port]``, as the API server sends it (an https backend's
        certificate is not verified; the caller's Authorization is not passed on)."""
        import http.client
        import ssl
        from urllib.parse import urlencode

        backend = self.server.fake.service_backends.get((route.namespace, route.name))
        if backend is None:
            raise ApiError(503, f'no endpoints available for service "{route.name}"')
        scheme, host, port = backend
        conn: http.client.HTTPConnection
        if scheme == "https":
            conn = http.client.HTTPSConnection(
                host, port, timeout=30, context=ssl._create_unverified_context()
            )
        else:
            conn = http.client.HTTPConnection(host, port, timeout=30)
        headers = {k: v for k, v in self.headers.items() if not k.lower().startswith(_PROXY_DROPS)}
        target = route.tail + ("?" + urlencode(query, doseq=True) if query else "")
        try:
            conn.request(method, target, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except OSError as e:
            raise ApiError(503, f"error trying to reach service: {e}") from None
        finally:
            conn.close()
        return resp.status, data, None

    @staticmethod
    def _json_object(body: bytes) -> dict[str, Any]:
        try:
            obj = json.loads(body) if body else None
        except ValueError as e:
            raise bad_request(f"json: cannot unmarshal request body: {e}") from None
        if not isinstance(obj, dict):
            raise bad_request("the request body must be a JSON object")
        if not isinstance(obj.get("metadata", {}), dict):
            raise bad_request("json: cannot unmarshal metadata: it must be an object")
        return obj

    @staticmethod
    def _check_kind(rt: ResourceType, obj: dict[str, Any]) -> None:
        if obj.get("apiVersion") not in (None, "", rt.api_version):
            raise bad_request(
                f"the API version in the data ({obj['apiVersion']}) does not match the expected API version ({rt.api_version})"
            )
        if obj.get("kind") not in (None, "", rt.kind):
            raise bad_request(
                f"the kind in the data ({obj['kind']}) does not match the expected kind ({rt.kind})"
            )

    @staticmethod
    def _matcher(rt: ResourceType, query: dict[str, list[str]]) -> Any:
        labels = label_matcher((query.get("labelSelector") or [""])[0])
        fields = field_matcher((query.get("fieldSelector") or [""])[0], rt.field_selectors)
        return lambda o: labels(o["metadata"].get("labels") or {}) and fields(o)

    def _list(self, rt: ResourceType, ns: str, query: dict[str, list[str]]) -> bytes:
        items, rv = self.server.fake.store.list(rt, ns or None, self._matcher(rt, query))
        cont = (query.get("continue") or [""])[0]
        if cont:
            after = _decode_continue(cont)
            items = [
                s
                for s in items
                if (s.obj["metadata"].get("namespace", ""), s.obj["metadata"]["name"]) > after
            ]
        limit_s = (query.get("limit") or ["0"])[0]
        try:
            limit = int(limit_s or 0)
        except ValueError:
            raise bad_request(f"invalid limit: {limit_s}") from None
        next_token = ""
        if limit > 0 and len(items) > limit:
            items = items[:limit]
            last = items[-1].obj["metadata"]
            next_token = _encode_continue(last["name"], last.get("namespace", ""))
        return self._list_body(rt, [s.item_raw for s in items], rv, next_token)

    @staticmethod
    def _list_body(rt: ResourceType, raws: list[bytes], rv: int, cont: str) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if cont:
            meta["continue"] = cont
        head = json.dumps(
            {"kind": rt.kind + "List", "apiVersion": rt.api_version, "metadata": meta}, separators=(",", ":")
        ).encode()
        return head[:-1] + b',"items":[' + b",".join(raws) + b"]}"

    def _patch(self, rt: ResourceType, route: _Route, body: bytes) -> Stored:
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype not in rt.patch_types or ctype not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH):
            if ctype in rt.patch_types:
                raise ApiError(415, f"{ctype} (server-side apply) is not implemented by this fake API server")
            raise unsupported_media_type(ctype, rt.patch_types)
        try:
            doc = json.loads(body)
        except ValueError as e:
            raise bad_request(f"error decoding patch: {e}") from None

        def change(current: dict[str, Any]) -> dict[str, Any]:
            if ctype == JSON_PATCH and isinstance(doc, list) and len(doc) > MAX_JSON_PATCH_OPS:
                raise ApiError(
                    413,
                    f"Request entity too large: The allowed maximum operations in a JSON patch is "
                    f"{MAX_JSON_PATCH_OPS}, got {len(doc)}",
                    reason="RequestEntityTooLarge",
                )
            try:
                if ctype == JSON_PATCH:
                    result = patches.apply_json_patch(current, doc, in_place=True)
                elif ctype == MERGE_PATCH:
                    if not isinstance(doc, dict):
                        raise bad_request("merge patch must be a JSON object")
                    result = patches.apply_merge_patch(current, doc)
                else:
                    result = patches.apply_strategic_merge_patch(current, doc)
            except patches.PatchFormatError as e:
                raise bad_request(str(e)) from None
            except patches.PatchError:
                # The API server says only this (no detail, empty details) for a JSON
                # Patch that does not apply, a failed "test" included.
                raise ApiError(
                    422, "the server rejected our request due to an error in our request", details={}
                ) from None
            if not isinstance(result, dict):
                raise ApiError(422, "the patch turned the object into something that is not an object")
            return result

        return self.server.fake.store.update(
            rt, route.namespace, route.name, change, subresource=route.subresource
        )

    def _token_review(self, body: bytes) -> tuple[int, dict[str, Any], None]:
        obj = self._json_object(body)
        if obj.get("kind") not in (None, "TokenReview") or obj.get("apiVersion") not in (
            None,
            TOKEN_REVIEW_API,
        ):
            raise bad_request("the request body is not an authentication.k8s.io/v1 TokenReview")
        spec = obj.get("spec") or {}
        if not spec.get("token"):
            raise ApiError(422, 'TokenReview.authentication.k8s.io "" is invalid: spec.token: Required value')
        review = {
            "kind": "TokenReview",
            "apiVersion": TOKEN_REVIEW_API,
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": self.server.fake.tokens.review(spec),
        }
        return 201, review, None

    # -- watch ------------------------------------------------------------------------

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _watch(self, route: _Route, query: dict[str, list[str]], started: Callable[[], None]) -> None:
        """Chunked stream of ``{"type": ..., "object": ...}`` lines until timeoutSeconds,
        the client hanging up, or the server stopping."""
        fake = self.server.fake
        rt = route.rt
        assert rt is not None
        store = fake.store
        match = self._matcher(rt, query)  # raises 400 before the stream starts
        rv_s = (query.get("resourceVersion") or [""])[0]
        try:
            timeout = float((query.get("timeoutSeconds") or ["0"])[0] or 0)
        except ValueError:
            raise bad_request("invalid timeoutSeconds") from None
        deadline = time.monotonic() + (timeout if timeout > 0 else 1800.0)
        ns = route.namespace

        def in_scope(namespace: str) -> bool:
            return not rt.namespaced or not ns or namespace == ns

        initial: list[bytes] = []
        if rv_s in ("", "0"):
            items, start = store.list(rt, ns or None, match)
            initial = [b'{"type":"ADDED","object":' + s.raw + b"}\n" for s in items]
        else:
            try:
                start = int(rv_s)
            except ValueError:
                raise bad_request(f"invalid resource version: {rv_s}") from None
            store.events_after(start, [rt.key])  # 410 before the stream starts if too old

        started()
        self.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Cache-Control: no-cache, private\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        self.close_connection = True
        for line in initial:
            self._chunk(line)
        last = start
        while not store.closed and not fake.stopping.is_set():
            try:
                events, last = store.events_after(last, [rt.key])
            except ApiError as e:
                self._chunk(json.dumps({"type": "ERROR", "object": e.status}).encode() + b"\n")
                break
            for ev in events:
                if not in_scope(ev.namespace):
                    continue
                now_in = match(ev.new.obj)
                was_in = ev.old is not None and match(ev.old.obj)
                if ev.type == "MODIFIED":
                    kind = (
                        "MODIFIED"
                        if now_in and was_in
                        else "ADDED"
                        if now_in
                        else "DELETED"
                        if was_in
                        else ""
                    )
                elif ev.type == "DELETED":
                    kind = "DELETED" if now_in else ""
                else:
                    kind = "ADDED" if now_in else ""
                if kind:
                    self._chunk(b'{"type":"' + kind.encode() + b'","object":' + ev.new.raw + b"}\n")
            remaining = deadline - time.monotonic()
            if fake.faults.down_mode() == "reset":
                # A server that is gone ends its streams unfinished, never with the
                # last chunk: the client sees a broken watch, not a finished one.
                self._drop_connection()
                return
            if remaining <= 0 or fake.faults.down_mode() is not None:
                break
            if not store.wait_beyond(last, min(remaining, 0.5)) and self._client_gone():
                return
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], fake: Any) -> None:
        self.fake = fake
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def track(self, conn: socket.socket, alive: bool) -> None:
        with self._conns_lock:
            if alive:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def close_all(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ServerCore:
    """Owns the listening socket and its thread; FakeApiServer builds on it."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_audiences: tuple[str, ...] | None = None,
        watch_history: int = 20_000,
        log_keep: int = 500_000,
    ) -> None:
        self.store = Store(history=watch_history)
        # Feature gates of this "API server" (absent: enabled), e.g. DRADeviceTaints.
        self.feature_gates = self.store.feature_gates
        self.gc = GarbageCollector(self.store)
        self.tokens = TokenRegistry(api_audiences) if api_audiences else TokenRegistry()
        self.tokens.pod_alive = self._pod_alive
        self.authz = Authorizer()
        self.faults = Faults()
        self.log = RequestLog(keep=log_keep)
        self.stopping = threading.Event()
        # When True, requests need a bearer token the registry knows (401 otherwise).
        self.require_auth = False
        # When True, RBAC (``authz``) decides every authenticated request (403 otherwise).
        self.enforce_rbac = False
        # The service proxy's backends: (namespace, "[scheme:]name[:port]" as the URL
        # names it) -> (scheme, host, port).
        self.service_backends: dict[tuple[str, str], tuple[str, str, int]] = {}
        self._host, self._port = host, port
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def _pod_alive(self, namespace: str, name: str, uid: str) -> bool:
        """A token bound to a pod is good while that very pod exists (the API server
        checks the bound object on every review)."""
        from .resources import PODS

        try:
            return bool(self.store.get(PODS, namespace, name).obj["metadata"]["uid"] == uid)
        except ApiError:
            return False

    def start(self) -> Any:
        """Serve. After ``stop()`` this serves again on the same port with the same state,
        so stop/start is an API server restart (connections refused in between)."""
        self.stopping.clear()
        with self.store.cond:
            self.store.closed = False
        self._httpd = _Server((self._host, self._port), self)
        self._port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-apiserver:{self._port}",
            daemon=True,
        )
        self._thread.start()
        self.gc.start()
        return self

    def drop_connections(self) -> None:
        """Close every open connection (watches included), as a restarting API server
        or a load balancer would; the server keeps accepting new ones."""
        if self._httpd is not None:
            self._httpd.close_all()

    def stop(self) -> None:
        self.stopping.set()
        self.gc.stop()
        self.store.close()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.close_all()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"
