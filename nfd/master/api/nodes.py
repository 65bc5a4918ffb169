"""The worker-facing API: features, heartbeats, and what the master makes of a node."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse

from nfd.master.api.deps import AuthorizedNode, NodeName, RuntimeDep
from nfd.master.api.models import (
    FeaturesRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    NodeList,
    NodeResponse,
    NodeStatus,
    Rejected,
    TaintModel,
)
from nfd.master.state import NodeRecord

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"])

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"description": "no token, or the token is not valid"},
    403: {"description": "the token is not a worker's, or is bound to another node"},
    413: {"description": "body over the master's limit"},
    422: {"description": "malformed body; `detail` names the field"},
    503: {"description": "cannot check the token now"},
}


def _response(rec: NodeRecord) -> NodeResponse:
    d = rec.decision
    return NodeResponse(
        node=rec.name,
        digest=rec.digest,
        labels=d.labels,
        annotations=d.annotations,
        extendedResources=d.extended_resources,
        taints=[TaintModel(key=t.key, value=t.value, effect=t.effect) for t in d.taints],
        rejected=Rejected(**d.rejected),
        updated=rec.updated,
    )


def _status(rec: NodeRecord) -> NodeStatus:
    base = _response(rec).model_dump()
    return NodeStatus(
        **base,
        nfdVersion=rec.nfd_version,
        devicePluginResources=sorted(rec.device_plugin_resources),
        published=rec.published,
        inSync=rec.published is not None and rec.published >= rec.updated and not rec.last_error,
        lastError=rec.last_error,
        ruleErrors=list(rec.decision.rule_errors),
    )


@router.put("/{node}/features", response_model=NodeResponse, responses=_ERRORS)
async def put_features(node: AuthorizedNode, body: FeaturesRequest, rt: RuntimeDep) -> NodeResponse:
    """A worker's full view of its node. Answers what the master applies for it."""
    rec = rt.service.store.get(node)
    if (
        rec is not None
        and body.digest
        and body.digest == rec.digest
        and frozenset(body.devicePluginResources) == rec.device_plugin_resources
    ):
        rt.metrics.update_requests.inc()
        return _response(rec)  # unchanged: no parsing, no decision, no write
    sub = rt.service.submit(
        node,
        features=body.features.model_dump(),
        device_plugin_resources=body.devicePluginResources,
        nfd_version=body.nfdVersion,
    )
    return _response(sub.record)


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


@router.get("", response_model=NodeList)
async def list_nodes(rt: RuntimeDep) -> NodeList:
    """Every node the master holds features for."""
    return NodeList(items=[_status(r) for r in sorted(rt.service.store, key=lambda r: r.name)])


@router.get("/{node}", response_model=NodeStatus, responses={404: {"description": "no features for it"}})
async def get_node(node: NodeName, rt: RuntimeDep) -> NodeStatus:
    """What the master applies to one node, what it rejected and why, and when."""
    rec = rt.service.store.get(node)
    if rec is None:
        raise HTTPException(404, f"no features received for node {node!r}")
    return _status(rec)
