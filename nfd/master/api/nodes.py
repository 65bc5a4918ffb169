"""What the master makes of nodes, for people and tools: one node, or the nodes a page
at a time. (The workers' own endpoints are in ``workers``.)"""

from __future__ import annotations

import asyncio
import bisect
import json
from collections.abc import AsyncIterator, Iterable
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response

from nfd.master.api.deps import ReadsNode, ReadsNodeList, RuntimeDep
from nfd.master.api.models import NODE_NAME_PATTERN, NodeList, NodeStatus, Problem
from nfd.master.api.views import status_json

router = APIRouter(prefix="/api/v1/nodes", tags=["nodes"])

DEFAULT_LIMIT = 100
MAX_LIMIT = 500
PAGE_BUILDS = 1  # pages built at once; more readers wait their turn
_CHUNK = 10  # nodes serialised between turns of the event loop

NodeName = Annotated[
    str,
    Path(min_length=1, max_length=253, pattern=NODE_NAME_PATTERN, description="the Node's name"),
]


def encode_continue(last: str) -> str:
    """The token for the page after the one ending at node ``last`` (opaque to clients:
    the name in hex, so that any token the schema allows is a place in name order)."""
    return last.encode().hex()


ContinueToken = Annotated[
    str,
    Query(
        alias="continue",
        max_length=506,
        pattern="^([0-9a-f]{2})*$",
        description="`metadata.continue` of the previous page",
    ),
]


def name_page(names: Iterable[str], continue_: str, limit: int) -> tuple[list[str], dict[str, object]]:
    """One page of node names in name order: at most ``limit`` after the page that
    ``continue_`` ended, and the page's ``metadata`` (the next token, how many remain)."""
    ordered = sorted(names)
    last = bytes.fromhex(continue_).decode("utf-8", "replace")
    start = bisect.bisect_right(ordered, last) if continue_ else 0
    page = ordered[start : start + limit]
    remaining = len(ordered) - start - len(page)
    return page, {
        "continue": encode_continue(page[-1]) if remaining > 0 else "",
        "remainingItemCount": remaining,
    }


async def chunks(names: list[str], size: int) -> AsyncIterator[list[str]]:
    """``names`` ``size`` at a time with a turn of the event loop between, so that
    heartbeats are answered while a page is built."""
    for i in range(0, len(names), size):
        if i:
            await asyncio.sleep(0)
        yield names[i : i + size]


READ_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": Problem, "description": "no token, or the token is not valid"},
    403: {"model": Problem, "description": "the token's user may not read nodes (RBAC: get/list nodes)"},
    503: {"model": Problem, "description": "cannot check the token now"},
}


@router.get("", response_model=NodeList, dependencies=[ReadsNodeList], responses=READ_ERRORS)
async def list_nodes(
    request: Request,
    rt: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="nodes per page")] = DEFAULT_LIMIT,
    continue_: ContinueToken = "",
) -> Response:
    """The nodes the master holds features for, in name order, ``limit`` at a time (as
    the Kubernetes API pages: follow ``metadata.continue`` until it is empty). Nodes
    added or removed between pages are seen or not by where their names fall."""
    # One page is built at a time, a few nodes between turns of the event loop: many
    # readers wait their turn instead of holding every page in memory, and heartbeats
    # are answered between the chunks.
    async with request.app.state.page_builds:
        page, meta = name_page(rt.service.store.nodes, continue_, limit)
        items: list[bytes] = []
        async for chunk in chunks(page, _CHUNK):
            items += [status_json(rec) for n in chunk if (rec := rt.service.store.get(n)) is not None]
    body = b'{"items": [' + b", ".join(items) + b'], "metadata": ' + json.dumps(meta).encode() + b"}"
    return Response(body, media_type="application/json")


@router.get(
    "/{node}",
    response_model=NodeStatus,
    dependencies=[ReadsNode],
    responses={**READ_ERRORS, 404: {"model": Problem, "description": "no features for it"}},
)
async def get_node(node: NodeName, rt: RuntimeDep) -> Response:
    """What the master applies to one node, what it rejected and why, and when."""
    rec = rt.service.store.get(node)
    if rec is None:
        raise HTTPException(404, f"no features received for node {node!r}")
    return Response(status_json(rec), media_type="application/json")
