"""The master's HTTP API as the worker speaks it (docs/worker-master-api.md).

Stdlib ``http.client`` with one keep-alive connection: a worker sends a request a
minute, and a persistent connection spares the master a TCP (and TLS) handshake each
time. The token is read from its file before each request because the kubelet rotates
projected tokens in place.
"""

from __future__ import annotations

import errno
import http.client
import json
import logging
import select
import socket
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0


class MasterUnreachable(Exception):
    """No answer from the master: refused, reset, timed out, TLS failure, bad reply.
    ``down``: nothing took the connection (refused, reset, no route, no such name): the
    master is restarting or not Ready yet, and asking again costs it nothing."""

    def __init__(self, message: str, *, down: bool = False) -> None:
        super().__init__(message)
        self.down = down


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # parsed JSON, or None when the body was not JSON
    retry_after: float | None = None  # seconds, from the Retry-After header
    # What the master did with the request (its X-NFD-Outcome header): "queued" (the
    # leader writes it), "forwarded" (a follower passed it to the leader), "held" (a
    # follower keeps it, the leader was not reached), "memory" (nothing is written);
    # "" from a master that does not say.
    outcome: str = ""

    def outcome_text(self, labels: int) -> str:
        """What the answer means for the node's labels, as one honest line."""
        return {
            "queued": f"the leading master will apply {labels} label(s)",
            "forwarded": f"a master forwarded them to the leader, which will apply {labels} label(s)",
            "held": (
                f"a follower master holds them ({labels} label(s) decided) but could not reach the"
                " leader; nothing is applied until a leader takes them"
            ),
            "memory": f"the master keeps them in memory only ({labels} label(s) decided, none applied)",
        }.get(self.outcome, f"the master accepted them ({labels} label(s) decided)")

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def reason(self) -> str:
        """The master's explanation, as one line (its ``detail``, else the status)."""
        detail = self.body.get("detail") if isinstance(self.body, dict) else None
        if isinstance(detail, list):  # FastAPI's validation errors: name the fields
            parts = []
            for item in detail:
                if isinstance(item, dict):
                    loc = ".".join(str(x) for x in item.get("loc", []))
                    parts.append(f"{loc}: {item.get('msg', '')}".strip(": "))
            detail = "; ".join(parts) or None
        if detail:
            return f"HTTP {self.status}: {detail}"
        return f"HTTP {self.status}"


class MasterClient:
    """Talks to one master; not thread-safe (the worker sends from one pass at a time)."""

    def __init__(
        self,
        base_url: str,
        *,
        token_file: Path | None = None,
        ca_file: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"master URL {base_url!r}: expected http://HOST[:PORT] or https://HOST[:PORT]")
        self.base_url = base_url
        self._https = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port
        self._prefix = url.path.rstrip("/")
        self._token_file = token_file
        self._ca_file = ca_file
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        if ca_file is not None and not self._https:
            log.warning("--ca-file is given but the master URL is not https; it is not used")

    # -- the API --------------------------------------------------------------------
    def put_features(self, node: str, body: dict[str, Any]) -> Reply:
        return self._request("PUT", f"/api/v1/nodes/{quote(node, safe='')}/features", body)

    def heartbeat(self, node: str, digest: str) -> Reply:
        return self._request("POST", f"/api/v1/nodes/{quote(node, safe='')}/heartbeat", {"digest": digest})

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- plumbing -------------------------------------------------------------------
    def _headers(self, length: int) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Content-Length": str(length),
        }
        token = self._read_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _read_token(self) -> str | None:
        if self._token_file is None:
            return None
        try:
            return self._token_file.read_text().strip() or None
        except OSError as e:
            # Send without one: the master answers 401 and the worker backs off, by when
            # the kubelet has usually (re)written the file.
            log.warning("cannot read token file %s: %s", self._token_file, e.strerror or e)
            return None

    def _connect(self) -> http.client.HTTPConnection:
        if self._conn is not None and _closed_by_peer(self._conn):
            # The master dropped the idle connection (uvicorn does after a few seconds):
            # start afresh rather than have the request fail on it.
            self.close()
        if self._conn is None:
            if self._https:
                import ssl  # only for https: the library is a few MB of resident memory

                ctx = ssl.create_default_context(cafile=self._ca_file)
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self._timeout, context=ctx
                )
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        return self._conn

    def _request(self, method: str, path: str, payload: dict[str, Any]) -> Reply:
        data = json.dumps(payload, separators=(",", ":")).encode()
        # A kept-alive connection may have been closed by the master (restart, idle
        # timeout) since the last request: one fresh retry tells that apart from a
        # master that is really gone.
        reused = self._conn is not None
        try:
            return self._send(method, path, data)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
            self.close()
            if not reused:
                raise _unreachable(e) from None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise _unreachable(e) from None
        try:
            return self._send(method, path, data)
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise _unreachable(e) from None

    def _send(self, method: str, path: str, data: bytes) -> Reply:
        conn = self._connect()
        conn.request(method, self._prefix + path, body=data, headers=self._headers(len(data)))
        resp = conn.getresponse()
        raw = resp.read()
        if resp.will_close:
            self.close()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        return Reply(
            resp.status,
            body,
            parse_retry_after(resp.getheader("Retry-After")),
            outcome=(resp.getheader("X-NFD-Outcome") or "").strip().lower(),
        )


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds: either a number of seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    sock = conn.sock
    if sock is None:
        return False
    try:
        # Readable while idle means EOF (or stray bytes): either way the connection is done.
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _unreachable(e: BaseException) -> MasterUnreachable:
    down = isinstance(e, ConnectionRefusedError | ConnectionResetError | socket.gaierror) or (
        isinstance(e, OSError) and e.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH)
    )
    return MasterUnreachable(_describe(e), down=down)


def _describe(e: BaseException) -> str:
    if isinstance(e, socket.timeout | TimeoutError):
        return "timed out"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
