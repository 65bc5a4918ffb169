"""The master's HTTP API as the worker speaks it (docs/worker-master-api.md).

The node's one HTTP/1.1 client, shared with the light Kubernetes transport: framing,
the kept-alive connection and the one resend when the master closed it while idle
(uvicorn does after a few seconds) are :mod:`nfd.kube.wire`'s; the token is
:class:`nfd.kube.tokenfile.TokenFile`'s (read again when the file changed: the kubelet
rotates projected tokens). One connection: a worker sends a request a minute, and a
persistent connection spares the master a TCP (and TLS) handshake each time.
"""

from __future__ import annotations

import errno
import json
import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from nfd.kube.tokenfile import TokenFile
from nfd.kube.wire import (
    Connection,
    NoAnswer,
    ProtocolError,
    authority,
    parse_retry_after,
    request_head,
    worth_resending,
)

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

    takes_refs = True  # a group may go by its hash (docs/worker-master-api.md)

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
        self._port = url.port or (443 if self._https else 80)
        self._authority = authority(self._host, self._port)
        self._prefix = url.path.rstrip("/")
        self._token = TokenFile(str(token_file)) if token_file is not None else None
        self._ca_file = ca_file
        self._timeout = timeout
        self._conn: Connection | None = None
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

    # -- plumbing -------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        token = self._read_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _read_token(self) -> str | None:
        if self._token is None:
            return None
        try:
            return self._token.read() or None
        except OSError as e:
            # Send without one: the master answers 401 and the worker backs off, by when
            # the kubelet has usually (re)written the file.
            log.warning("cannot read token file %s: %s", self._token.path, e.strerror or e)
            return None

    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = Connection(self._host, self._port, None)
            self._conn.settimeout(self._timeout)
        return self._conn

    def _request(self, method: str, path: str, payload: dict[str, Any]) -> Reply:
        data = json.dumps(payload, separators=(",", ":")).encode()
        head = request_head(method, self._prefix + path, self._authority, self._headers(), len(data))
        conn = self._connection()
        while True:
            kept = conn.sock is not None  # open since an earlier request
            if not kept and self._https:
                # The CA file is read again for each new connection: a CA the kubelet
                # updated in place is used without a restart.
                import ssl  # only for https: the library is a few MiB of resident memory

                conn.context = ssl.create_default_context(cafile=self._ca_file)
            try:
                answer, raw = conn.exchange(head, data)
            except (ProtocolError, OSError) as e:
                conn.close()
                # Once more, on a fresh connection, only if the master closed the
                # kept-alive one meanwhile (the next try is on a fresh one: no loop).
                if worth_resending(e, kept):
                    continue
                raise _unreachable(e) from None
            if answer.will_close:
                conn.close()
            break
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        return Reply(
            answer.status,
            body,
            parse_retry_after(answer.headers.get("retry-after")),
            outcome=answer.headers.get("x-nfd-outcome", "").strip().lower(),
        )


def _unreachable(e: BaseException) -> MasterUnreachable:
    # NoAnswer on a fresh connection: taken and closed at once, as by a master shutting
    # down; counted with a reset.
    down = isinstance(e, ConnectionRefusedError | ConnectionResetError | NoAnswer | socket.gaierror) or (
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
