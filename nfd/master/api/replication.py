"""The leader's side of replication (nfd/master/replication/replica.py): a follower
sends what it holds, the leader answers the features it lacks; a follower hands over
what it held while it could not forward, the leader takes what is not older than its
own."""

from __future__ import annotations

import json

from fastapi import APIRouter, HTTPException, Request, Response

from nfd.master.api import jsonbody
from nfd.master.api.deps import RuntimeDep
from nfd.master.api.models import HeldRequest, HeldResponse
from nfd.master.replication.replica import HELD_PATH, PAGE, PATH, node_item, take_held, wanted
from nfd.master.runtime import Runtime

router = APIRouter(tags=["replication"])

# What a replica asking another may be answered besides 200 (see _leader_for_a_peer).
_PEER_ERRORS: dict[int | str, dict[str, str]] = {
    401: {"description": "no or bad token"},
    403: {"description": "not the master's service account"},
    409: {"description": "this replica does not lead"},
    422: {"description": "malformed body"},
    503: {"description": "cannot check the token now"},
}


@router.post(
    PATH,
    responses=_PEER_ERRORS,
    # The body is read as it comes (no model copy of thousands of keys); its shape is
    # still declared.
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["held"],
                        "properties": {
                            "held": {"type": "object", "additionalProperties": {"type": "string"}}
                        },
                    }
                }
            },
        }
    },
)
async def replicate(request: Request, rt: RuntimeDep) -> Response:
    """Body ``{"held": {node: key}}``; answers ``{"items": [...], "more": bool}`` with the
    features of the nodes whose key differs (a page at a time)."""
    await _leader_for_a_peer(request, rt)
    try:
        held = json.loads(await request.body()).get("held")
    except (ValueError, AttributeError):
        held = None
    if not isinstance(held, dict) or not all(isinstance(v, str) for v in held.values()):
        raise HTTPException(422, 'body: expected {"held": {node: key}}')
    recs, more = wanted(rt.service.store, held, PAGE)
    items = [node_item(rt.service.store, r) for r in recs]
    return Response(json.dumps({"items": items, "more": more}), media_type="application/json")


@router.post(
    HELD_PATH,
    response_model=HeldResponse,
    responses=_PEER_ERRORS,
    # Read as it comes, so that the token is checked before anything about the body.
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HeldRequest"}}},
        }
    },
)
async def take_over_held(request: Request, rt: RuntimeDep) -> Response:
    """Body ``{"items": [{node, base, features, ...}]}``: what a follower held while it
    could not forward. Each node's features are taken when the leader still holds what
    the follower last knew (``base``); newer features the leader got since stay."""
    await _leader_for_a_peer(request, rt)
    try:
        data = jsonbody.parse(await request.body())
        jsonbody.check(HeldRequest, data)
    except jsonbody.BodyError as e:
        raise HTTPException(422, e.issues) from None
    taken, kept = take_held(rt.service, data["items"])
    return Response(json.dumps({"taken": taken, "kept": kept}), media_type="application/json")


async def _leader_for_a_peer(request: Request, rt: Runtime) -> None:
    """Another replica is asking, and this replica leads: else an HTTPException."""
    status, why = await rt.peer_auth.check(request.headers.get("authorization"))
    if status:
        raise HTTPException(status, why)
    if rt.leader_url() is not None or not rt.may_write():
        raise HTTPException(409, "this replica does not lead; ask the leader")
