"""Every replica serves workers; only the leader writes. A follower takes a worker's
features PUT or heartbeat as the leader would (authenticated, checked, stored: it holds
a copy, so that when it takes over it needs no resend), then hands the same request to
the leader (its address is on the Lease) and answers with the leader's answer. When the
leader cannot be reached, or its address is not known yet, the follower's own answer
goes back, marked ``held``, and the follower hands what it held to the leader once it
can (``replica.Replica.hand_over``).

Each answer says what happened in the ``X-NFD-Outcome`` header:
``queued`` (this replica leads and writes it), ``forwarded`` (a follower passed it to the
leader, whose answer this is), ``held`` (a follower keeps it; the leader was not
reached), ``memory`` (nothing is written to the API server).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nfd.master.core.bodylimit import read_body
from nfd.master.replication.peers import LeaderUnreachable
from nfd.master.replication.replica import own_key

if TYPE_CHECKING:
    from nfd.master.decisions.service import MasterService
    from nfd.master.replication.peers import Forwarder
    from nfd.master.replication.replica import Replica

log = logging.getLogger(__name__)

OUTCOME = b"x-nfd-outcome"
FORWARDED = b"x-nfd-forwarded"  # set on a forwarded request: never forwarded again
_PATH = re.compile(r"^/api/v1/nodes/([^/]+)/(heartbeat|features)$")
_PASS = (b"authorization", b"content-type")


class ForwardParts(Protocol):
    """What forwarding uses of the master's runtime (nfd.master.runtime.Runtime), named
    here so that this module does not import it."""

    @property
    def service(self) -> MasterService: ...
    @property
    def replica(self) -> Replica | None: ...
    @property
    def forwarder(self) -> Forwarder: ...
    def leader_url(self) -> str | None: ...
    def outcome_here(self) -> bytes: ...


class LeaderForward:
    """ASGI middleware in front of the worker endpoints."""

    def __init__(self, app: ASGIApp, runtime: Callable[[], ForwardParts]) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        m = _PATH.match(scope["path"]) if scope["type"] == "http" else None
        if m is None or scope["method"] not in ("POST", "PUT"):
            await self.app(scope, receive, send)
            return
        rt = self.runtime()
        node, features = m.group(1), m.group(2) == "features"
        # What a worker last sent for the node, should this replica keep the request.
        before = own_key(rt.service.store.get(node)) if features and rt.replica is not None else ""
        target = rt.leader_url()
        forwarded = any(k == FORWARDED for k, _ in scope["headers"])
        if target is None or forwarded:
            outcome = rt.outcome_here()
            status = await _tagged(self.app, scope, receive, send, outcome)
            if status == 200 and features and outcome == b"held":
                _held(rt, node, before)
            return
        body = await read_body(receive)
        if body is None:
            return
        status, headers, payload = await _local(self.app, scope, body)
        outcome = b"held"
        # Taken here (or, a heartbeat, not known): now the leader. A features PUT naming
        # groups this replica does not hold (409) goes back to the worker, who sends
        # them whole, for this replica and the leader alike.
        if status == 200 or (status == 409 and not features):
            try:
                status, headers, payload = await rt.forwarder.send(
                    target + scope["path"], scope["method"], _pass_headers(scope), body
                )
                outcome = b"forwarded"
            except LeaderUnreachable:  # our copy stands (the Forwarder logs the outage)
                pass
            if outcome == b"held" and status == 200 and features:
                _held(rt, node, before)
            elif outcome == b"forwarded" and status == 200 and rt.replica is not None:
                rt.replica.passed(node)  # the leader holds what the worker has
        else:
            outcome = b""  # refused here (401, 403, 413, 422 ...): nothing was taken
        headers = [h for h in headers if h[0] not in (b"content-length", OUTCOME)]
        headers.append((b"content-length", str(len(payload)).encode()))
        if outcome:
            headers.append((OUTCOME, outcome))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _held(rt: ForwardParts, node: str, before: str) -> None:
    if rt.replica is not None:
        rt.replica.hold(node, before)


def _pass_headers(scope: Scope) -> dict[str, str]:
    out = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k in _PASS}
    out[FORWARDED.decode()] = "1"
    return out


async def _tagged(app: ASGIApp, scope: Scope, receive: Receive, send: Send, outcome: bytes) -> int:
    """Run the request here, its answer marked with ``outcome``; returns its status."""
    status = 0

    async def tagged(msg: Message) -> None:
        nonlocal status
        if msg["type"] == "http.response.start":
            status = msg["status"]
            if status in (200, 409):
                msg = {**msg, "headers": [*msg.get("headers", []), (OUTCOME, outcome)]}
        await send(msg)

    await app(scope, receive, tagged)
    return status


async def _local(app: ASGIApp, scope: Scope, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run the request through this replica's own app and keep its answer."""
    sent = False
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # nothing more: the body was whole
        return {"type": "http.disconnect"}

    async def capture(msg: Message) -> None:
        nonlocal status, headers
        if msg["type"] == "http.response.start":
            status, headers = msg["status"], list(msg.get("headers", []))
        elif msg["type"] == "http.response.body":
            chunks.append(msg.get("body", b""))

    await app(scope, receive, capture)
    return status, headers, b"".join(chunks)
