"""The worker endpoints: ``PUT /api/v1/nodes/{node}/features`` and
``POST /api/v1/nodes/{node}/heartbeat``, served here and only here, in front of FastAPI.

Thousands of workers call these every minute, mostly to say that nothing changed.
FastAPI's routing, dependency and validation machinery costs several times the work
itself, so these two are a plain ASGI handler; FastAPI serves the reads, the probes and
the OpenAPI document, which declares these two operations from ``openapi_paths``.

Every request is answered in the same order: the method, then the caller's token (401
before anything about the body), then the node name, then the body (UTF-8 JSON,
bounded depth, checked against the wire model). Errors are ``{"detail": "..."}``, or for
422 FastAPI's list of ``{"loc", "msg", "type"}``.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from nfd.master.api import jsonbody
from nfd.master.api.models import FeaturesRequest, HeartbeatRequest, node_name_problem
from nfd.master.api.views import response_json
from nfd.master.core.bodylimit import read_body
from nfd.master.runtime import Runtime
from nfd.master.security.auth import AuthError

# Anything under /api/v1/nodes/ ending in /heartbeat or /features is ours, whatever the
# node part holds (a bad name is a 422 here, not a 404 elsewhere). fullmatch: a path
# "…/features\n" (``%0A``) is not "…/features".
_PATH = re.compile(r"/api/v1/nodes/(.*)/(heartbeat|features)", re.DOTALL)
_METHOD = {"heartbeat": "POST", "features": "PUT"}
_JSON = (b"content-type", b"application/json")
_UNKNOWN_DIGEST = b'{"known":false,"detail":"the master holds no features with this digest for the node"}'

Answer = tuple[int, bytes, list[tuple[bytes, bytes]]]


def _problem(status: int, detail: object, headers: list[tuple[bytes, bytes]] | None = None) -> Answer:
    return status, json.dumps({"detail": detail}).encode(), headers or []


class WorkerEndpoints:
    def __init__(self, app: ASGIApp, runtime: Callable[[], Runtime]) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        m = _PATH.fullmatch(scope["path"]) if scope["type"] == "http" else None
        if m is None:
            await self.app(scope, receive, send)
            return
        answer = await self._answer(scope, receive, node=m.group(1), kind=m.group(2))
        if answer is None:
            return  # the client went away
        status, payload, headers = answer
        await send({"type": "http.response.start", "status": status,
                    "headers": [_JSON, (b"content-length", b"%d" % len(payload)), *headers]})  # fmt: skip
        await send({"type": "http.response.body", "body": payload})

    async def _answer(self, scope: Scope, receive: Receive, *, node: str, kind: str) -> Answer | None:
        method = _METHOD[kind]
        if scope["method"] != method:
            return _problem(405, f"{kind} takes {method}", [(b"allow", method.encode())])
        rt = self.runtime()
        if rt.authenticator is not None:
            try:
                await rt.authenticator.authorize(_header(scope, b"authorization"), node)
            except AuthError as e:
                return _problem(e.status, str(e), _auth_headers(e.status))
        why = node_name_problem(node)
        if why is not None:
            return _problem(422, [{"loc": ["path", "node"], "msg": why, "type": "node_name"}])
        body = await read_body(receive)
        if body is None:
            return None
        try:
            if kind == "heartbeat":
                return _heartbeat(rt, node, body)
            return _features(rt, node, body)
        except jsonbody.BodyError as e:
            return _problem(422, e.issues)


def _heartbeat(rt: Runtime, node: str, body: bytes) -> Answer:
    data = jsonbody.parse(body)
    jsonbody.check(HeartbeatRequest, data)
    if rt.service.heartbeat(node, data["digest"]):
        return 200, b'{"known":true}', []
    return 409, _UNKNOWN_DIGEST, []


def _features(rt: Runtime, node: str, body: bytes) -> Answer:
    body_hash = hashlib.sha256(body).digest()
    rec = rt.service.store.get(node)
    if rec is not None and rec.body_hash == body_hash:
        # The body the node sent last (the steady state without heartbeats): it was
        # checked then and decides nothing new.
        rt.metrics.update_requests.inc()
        rec.last_seen = time.monotonic()
    else:
        data = jsonbody.parse_features(body)
        missing = rt.service.resolve_refs(data["features"])
        if missing:
            return 409, _missing_groups(missing), []
        rec = rt.service.submit(
            node,
            features=data["features"],
            device_plugin_resources=data.get("devicePluginResources") or (),
            nfd_version=data.get("nfdVersion") or "",
        ).record
        rec.body_hash = body_hash
    if rec.node_missing:  # the last write found no such Node: one more try per request
        rec.node_missing = False
        rt.publisher.enqueue(node)
    return 200, response_json(rec), []


def _missing_groups(missing: list[str]) -> bytes:
    detail = f"the master holds no group with the ref given for {', '.join(missing)}: send them whole"
    return json.dumps({"known": False, "missing": missing, "detail": detail}).encode()


def _header(scope: Scope, name: bytes) -> str | None:
    for k, v in scope["headers"]:
        if k == name:
            return bytes(v).decode("latin-1")
    return None


def _auth_headers(status: int) -> list[tuple[bytes, bytes]]:
    if status == 401:
        return [(b"www-authenticate", b"Bearer")]
    if status == 503:
        return [(b"retry-after", b"5")]
    return []


# -- the OpenAPI description of the two operations ---------------------------------------


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def openapi_paths(node_param: dict[str, Any]) -> dict[str, Any]:
    """The path items of the worker endpoints (schemas named as in ``openapi_models``)."""
    errors = {
        "401": _json(_ref("Problem"), "no token, or the token is not valid (checked before the body)"),
        "403": _json(_ref("Problem"), "the token is not a worker's, or is bound to another node"),
        "405": _json(_ref("Problem"), "wrong method for this path"),
        "413": _json(_ref("Problem"), "body over the master's limit"),
        "422": _json(
            _ref("HTTPValidationError"),
            f"bad node name, or a body that is not UTF-8 JSON (nesting at most {jsonbody.MAX_DEPTH} "
            "levels) of the request's shape; `detail` names the field",
        ),
        "503": _json(_ref("Problem"), "cannot check the token now; `Retry-After` says when to try again"),
    }

    def op(summary: str, request: str, answers: dict[str, Any], op_id: str) -> dict[str, Any]:
        return {
            "tags": ["nodes"],
            "summary": summary,
            "operationId": op_id,
            "parameters": [node_param],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(request)}}},
            "responses": {**answers, **errors},
        }

    return {
        "/api/v1/nodes/{node}/features": {
            "put": op(
                "A worker's full view of its node; answers what the master applies for it",
                "FeaturesRequest",
                {
                    "200": _json(_ref("NodeResponse"), "what the master applies (or will apply)"),
                    "409": _json(
                        _ref("MissingGroups"), "groups named by ref the master does not hold: send them whole"
                    ),
                },
                "put_features",
            )
        },
        "/api/v1/nodes/{node}/heartbeat": {
            "post": op(
                "Steady state: the worker's features still have this digest",
                "HeartbeatRequest",
                {
                    "200": _json(_ref("HeartbeatResponse"), "the master holds these features"),
                    "409": _json(_ref("HeartbeatResponse"), "unknown digest: send the full features"),
                },
                "heartbeat",
            )
        },
    }


def openapi_models() -> list[Any]:
    from nfd.master.api.models import HeartbeatResponse, MissingGroups, NodeResponse, Problem

    return [FeaturesRequest, HeartbeatRequest, HeartbeatResponse, MissingGroups, NodeResponse, Problem]
