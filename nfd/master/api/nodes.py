"""The worker-facing API: features, heartbeats, and what the master makes of a node."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from nfd.master.api.deps import AuthorizedNode, NodeName, ReadsNode, ReadsNodeList, RuntimeDep
from nfd.master.api.models import (
    FeaturesRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    NodeList,
    NodeResponse,
    NodeStatus,
)
from nfd.master.api.views import response_json, status_dict
from nfd.master.runtime import Runtime
from nfd.master.state import NodeRecord

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"])

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"description": "no token, or the token is not valid"},
    403: {"description": "the token is not a worker's, or is bound to another node"},
    413: {"description": "body over the master's limit"},
    422: {"description": "malformed body; `detail` names the field"},
    503: {"description": "cannot check the token now"},
}


@router.put(
    "/{node}/features",
    response_model=NodeResponse,
    responses=_ERRORS,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/FeaturesRequest"}}},
        }
    },
)
async def put_features(node: AuthorizedNode, request: Request, rt: RuntimeDep) -> Response:
    """A worker's full view of its node (body: FeaturesRequest). Answers what the master
    applies for it."""
    raw = await request.body()
    body_hash = hashlib.sha256(raw).digest()
    rec = rt.service.store.get(node)
    if rec is None or rec.body_hash != body_hash:
        rec = take_features(rt, node, _parse(raw), body_hash)
    else:
        rt.metrics.update_requests.inc()
    return Response(response_json(rec), media_type="application/json")


def take_features(rt: Runtime, node: str, data: dict[str, Any], body_hash: bytes) -> NodeRecord:
    """A checked features request (``_parse``/``parse_features``) into the service."""
    rec = rt.service.submit(
        node,
        features=data["features"],
        device_plugin_resources=data.get("devicePluginResources") or (),
        nfd_version=data.get("nfdVersion") or "",
    ).record
    rec.body_hash = body_hash
    return rec


def parse_features(raw: bytes) -> dict[str, Any] | None:
    """The body as ``_parse`` takes it, or None where ``_parse`` would refuse it."""
    try:
        data = json.loads(raw)
        FeaturesRequest.model_validate(data)
    except Exception:  # whatever the route refuses (422, or worse) is left to it
        return None
    return data  # type: ignore[no-any-return]


def _parse(raw: bytes) -> dict[str, Any]:
    """The body as JSON, checked against FeaturesRequest; 422 names the field. The raw
    dict is used from here on: it is what the model checked, without a copy."""
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise RequestValidationError(
            [{"loc": ("body",), "msg": f"JSON decode error: {e}", "type": "json_invalid"}]
        ) from None
    try:
        FeaturesRequest.model_validate(data)
    except ValidationError as e:
        raise RequestValidationError(
            [{"loc": ("body", *err["loc"]), "msg": err["msg"], "type": err["type"]} for err in e.errors()]
        ) from None
    return data  # type: ignore[no-any-return]


@router.post(
    "/{node}/heartbeat",
    response_model=HeartbeatResponse,
    response_model_exclude_none=True,
    responses={**_ERRORS, 409: {"model": HeartbeatResponse, "description": "send the full features"}},
)
async def heartbeat(node: AuthorizedNode, body: HeartbeatRequest, rt: RuntimeDep) -> HeartbeatResponse:
    """Steady state: the worker's features still have this digest."""
    if rt.service.heartbeat(node, body.digest):
        return HeartbeatResponse(known=True)
    return JSONResponse(  # type: ignore[return-value]
        status_code=409,
        content={"known": False, "detail": "the master holds no features with this digest for the node"},
    )


_READ_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"description": "no token, or the token is not valid"},
    403: {"description": "the token's user may not read nodes (RBAC: get/list nodes)"},
    503: {"description": "cannot check the token now"},
}


@router.get("", response_model=NodeList, dependencies=[ReadsNodeList], responses=_READ_ERRORS)
async def list_nodes(rt: RuntimeDep) -> Response:
    """Every node the master holds features for."""
    items = [status_dict(r) for r in sorted(rt.service.store, key=lambda r: r.name)]
    return Response(json.dumps({"items": items}), media_type="application/json")


@router.get(
    "/{node}",
    response_model=NodeStatus,
    dependencies=[ReadsNode],
    responses={**_READ_ERRORS, 404: {"description": "no features for it"}},
)
async def get_node(node: NodeName, rt: RuntimeDep) -> Response:
    """What the master applies to one node, what it rejected and why, and when."""
    rec = rt.service.store.get(node)
    if rec is None:
        raise HTTPException(404, f"no features received for node {node!r}")
    return Response(json.dumps(status_dict(rec)), media_type="application/json")
