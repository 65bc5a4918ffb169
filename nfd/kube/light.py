"""The light transport: HTTP/1.1 over the stdlib's ``socket`` and ``ssl``
(:mod:`nfd.kube.wire`, which the worker's client to the master speaks too), for the
per-node agents (``nfd dra``, the worker's NodeFeature publisher, the topology updater).

Why not the ``kubernetes`` package: importing it costs about 37 MiB of RSS, and a per-node
agent's memory is paid once per node. The agents need a few JSON requests and a watch,
so this is the whole client: kept-alive connections (a few, for the agents' threads),
one connection per watch, the current token for each request."""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from nfd.kube.config import Credentials
from nfd.kube.errors import ApiError, Unreachable, from_response
from nfd.kube.transport import JSON, Count, counted, request_name
from nfd.kube.wire import Connection, ProtocolError, authority, request_head, worth_resending

MAX_IDLE = 4  # kept-alive connections: the agents' threads rarely ask at once


class LightTransport:
    def __init__(
        self,
        creds: Credentials,
        *,
        timeout: float = 30.0,
        user_agent: str = "nfd",
        count: Count | None = None,
    ) -> None:
        self.creds = creds
        self.timeout = timeout
        self.user_agent = user_agent
        self.count = count
        self._context: ssl.SSLContext | None = creds.ssl_context()
        self._host, self._port = creds.address()
        self._prefix = creds.base_path
        self._authority = authority(self._host, self._port)
        self._lock = threading.Lock()
        self._idle: list[Connection] = []
        self._busy: set[Connection] = set()
        self._aborted = False

    def _headers(self, body: bytes | None, content_type: str) -> dict[str, str]:
        h = {"Accept": JSON, "User-Agent": self.user_agent}
        token = self.creds.bearer()
        if token:
            h["Authorization"] = f"Bearer {token}"
        if body is not None:
            h["Content-Type"] = content_type
        return h

    def _take(self, timeout: float) -> tuple[Connection, bool]:
        """A connection, and whether it was kept alive (and may have been closed by the
        server meanwhile)."""
        with self._lock:
            if self._aborted:
                raise Unreachable(None, "stopping")
            kept = bool(self._idle)
            conn = self._idle.pop() if kept else Connection(self._host, self._port, self._context)
            conn.settimeout(timeout)
            self._busy.add(conn)
        return conn, kept

    def _give(self, conn: Connection, *, keep: bool) -> None:
        with self._lock:
            self._busy.discard(conn)
            if keep and not self._aborted and len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

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
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        sent = self._headers(data, content_type)
        if headers:
            sent.update(headers)
        head = request_head(
            method, self._prefix + path, self._authority, sent, None if data is None else len(data)
        )
        while True:
            conn, kept = self._take(timeout or self.timeout)
            try:
                answer, raw = conn.exchange(head, data)
            except (ProtocolError, OSError) as e:
                self._give(conn, keep=False)
                # Again on another connection (the next idle one, else a fresh one) only
                # if the server closed this one while it was idle.
                if worth_resending(e, kept):
                    continue
                counted(self.count, method, path, None)
                raise Unreachable(
                    None, f"{request_name(method, path)}: {'stopping' if self._aborted else e}"
                ) from None
            self._give(conn, keep=not answer.will_close)
            counted(self.count, method, path, answer.status)
            return _decode(answer.status, raw, answer.headers.get("retry-after"), method, path)

    def watch(self, path: str, *, timeout: float) -> Iterator[dict[str, Any]]:
        what = request_name("WATCH", path)
        head = request_head("GET", self._prefix + path, self._authority, self._headers(None, JSON), None)
        conn, _ = self._take(timeout)
        try:
            conn.send(head, None)
            answer = conn.answer()
            counted(self.count, "GET", path, answer.status)
            if answer.status != 200:
                raise from_response(answer.status, conn.body(answer), answer.headers.get("retry-after"), what)
            for line in conn.lines(answer):
                if line.strip():
                    yield json.loads(line)
        except (ProtocolError, OSError, ValueError) as e:
            raise Unreachable(None, f"{what}: {'stopping' if self._aborted else e}") from None
        finally:
            self._give(conn, keep=False)  # a stream left midway is not reused

    def abort(self) -> None:
        """Takes the lock only to see the connections: a blocked read sees EOF through
        the plain socket's shutdown (TLS too)."""
        with self._lock:
            self._aborted = True
            socks = [c.sock for c in self._busy if c.sock is not None]
        for sock in socks:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:  # closed meanwhile
                pass

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _decode(status: int, raw: bytes, retry_after: str | None, method: str, path: str) -> dict[str, Any]:
    if status >= 400:
        raise from_response(status, raw, retry_after, request_name(method, path))
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError:
        raise ApiError(status, f"{request_name(method, path)}: the answer is not JSON") from None
    if not isinstance(doc, dict):
        raise ApiError(status, f"{request_name(method, path)}: the answer is not a JSON object")
    return doc
