"""The steady state, answered before FastAPI's routing and dependency machinery:
heartbeats, and features PUTs whose body is byte-for-byte the one the node sent last.
Thousands of workers send these every minute; they change nothing. Well-formed new
features are taken here too, as the route takes them (a fleet's first minute is
thousands of those).

Only answers it can give in full: no authentication to do (``--no-auth``, or the token
is in the review cache as this node's worker) and a well-formed body. Everything else,
errors included, goes on to the routes in api/, which are the reference behaviour.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nfd.master.api.nodes import parse_features, take_features
from nfd.master.api.views import response_json
from nfd.master.forward import read_body
from nfd.master.runtime import Runtime

_PATH = re.compile(r"^/api/v1/nodes/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)/(heartbeat|features)$")
_JSON = [(b"content-type", b"application/json")]


class FastPath:
    def __init__(self, app: ASGIApp, runtime: Callable[[], Runtime]) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT"):
            await self.app(scope, receive, send)
            return
        m = _PATH.match(scope["path"])
        kind = m.group(3) if m else ""
        if not m or (kind == "heartbeat") != (scope["method"] == "POST") or len(m.group(1)) > 253:
            await self.app(scope, receive, send)
            return
        node = m.group(1)
        rt = self.runtime()
        if rt.authenticator is not None:
            auth = None
            for k, v in scope["headers"]:
                if k == b"authorization":
                    auth = v.decode("latin-1")
            if not rt.authenticator.cached_for(auth, node):
                await self.app(scope, receive, send)
                return
        body = await read_body(receive)
        if body is None:
            return  # the client went away
        answer = self._answer(rt, kind, node, body)
        if answer is None:
            await self.app(scope, _replay(body, receive), send)
            return
        status, payload = answer
        await send({"type": "http.response.start", "status": status,
                    "headers": [*_JSON, (b"content-length", str(len(payload)).encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": payload})

    @staticmethod
    def _answer(rt: Runtime, kind: str, node: str, body: bytes) -> tuple[int, bytes] | None:
        if kind == "heartbeat":
            try:
                data = json.loads(body)
            except ValueError:
                return None
            if not isinstance(data, dict) or not isinstance(data.get("digest"), str):
                return None
            if rt.service.heartbeat(node, data["digest"]):
                return 200, b'{"known":true}'
            return 409, (
                b'{"known":false,"detail":"the master holds no features with this digest for the node"}'
            )
        rec = rt.service.store.get(node)
        body_hash = hashlib.sha256(body).digest()
        if rec is not None and rec.body_hash == body_hash:
            rt.metrics.update_requests.inc()
            rec.last_seen = time.monotonic()
            return 200, response_json(rec)
        # New features: taken here as the route takes them (the same parse, check and
        # submit), without the router and dependency machinery around it. A body the
        # route would refuse goes on to it, for its 422.
        data = parse_features(body)
        if data is None:
            return None
        return 200, response_json(take_features(rt, node, data, body_hash))


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
