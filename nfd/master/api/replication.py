"""The leader's side of replication (nfd/master/replica.py): a follower sends what it
holds, the leader answers the features it lacks."""

from __future__ import annotations

import json

from fastapi import APIRouter, HTTPException, Request, Response

from nfd.master.api.deps import RuntimeDep
from nfd.master.replica import PAGE, PATH, wanted

router = APIRouter(tags=["replication"])


@router.post(
    PATH,
    responses={
        401: {"description": "no or bad token"},
        403: {"description": "not the master's service account"},
        409: {"description": "this replica does not lead"},
        422: {"description": "malformed body"},
    },
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
                        "properties": {"held": {"type": "object", "additionalProperties": {"type": "string"}}},
                    }
                }
            },
        }
    },
)
async def replicate(request: Request, rt: RuntimeDep) -> Response:
    """Body ``{"held": {node: key}}``; answers ``{"items": [...], "more": bool}`` with the
    features of the nodes whose key differs (a page at a time)."""
    status, why = await rt.peer_auth.check(request.headers.get("authorization"))
    if status:
        raise HTTPException(status, why)
    if rt.leader_url() is not None or not rt.may_write():
        raise HTTPException(409, "this replica does not lead; ask the leader")
    try:
        held = json.loads(await request.body()).get("held")
    except (ValueError, AttributeError):
        held = None
    if not isinstance(held, dict) or not all(isinstance(v, str) for v in held.values()):
        raise HTTPException(422, "body: expected {\"held\": {node: key}}")
    recs, more = wanted(rt.service.store, held, PAGE)
    features = rt.service.store.features
    items = [
        {
            "node": r.name,
            "nfdVersion": r.nfd_version,
            "devicePluginResources": sorted(r.device_plugin_resources),
            "features": features.get(r.digest).to_dict(),
        }
        for r in recs
    ]
    return Response(json.dumps({"items": items, "more": more}), media_type="application/json")
