"""Each node's features, for tools that evaluate rules on the live cluster
(``kubectl nfd rules test --cluster``) without asking the master to do it: a page of
nodes names each node's feature groups by content hash, and carries every group the
page names once. Nodes share most groups, so a page costs little more than its
distinct groups, served as the store holds them (decompressed, never parsed)."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from nfd.master.api.deps import ReadsNodeList, RuntimeDep
from nfd.master.api.nodes import MAX_LIMIT, READ_ERRORS, ContinueToken, chunks, name_page

router = APIRouter(prefix="/api/v1/features", tags=["nodes"])

DEFAULT_LIMIT = 500
_CHUNK = 50  # nodes between turns of the event loop


@router.get("", dependencies=[ReadsNodeList], responses=READ_ERRORS)
async def list_features(
    request: Request,
    rt: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="nodes per page")] = DEFAULT_LIMIT,
    continue_: ContinueToken = "",
) -> Response:
    """The nodes' features in name order, ``limit`` at a time (needs ``list nodes``).
    ``items[].groups`` maps ``kind/name`` (``attributes/kernel.version``) to a hash;
    ``groups`` maps each hash the page names to the group's elements.
    ``items[].builtinLabels`` names the page's ``labelSets`` entry holding the built-in
    labels the node carries now (from the worker's features); ``nodeLabels`` is what its
    NodeFeature objects ask for."""
    store = rt.service.store
    async with request.app.state.page_builds:
        page, meta = name_page(store.nodes, continue_, limit)
        items: list[str] = []
        groups: dict[str, bytes] = {}
        # Built-in label sets, once a page: nodes of a kind share one decision.
        label_sets: dict[int, tuple[str, bytes]] = {}
        async for chunk in chunks(page, _CHUNK):
            for name in chunk:
                rec = store.get(name)
                if rec is None or rec.digest not in store.features:
                    continue
                parts = store.features.parts(rec.digest)
                for _k, _n, h in parts:
                    if h not in groups:
                        groups[h] = store.features.group_json(h)
                d = rec.decision
                if id(d) not in label_sets:
                    builtin = {k: v for k, v in d.labels.items() if d.origins.get(k) == "worker"}
                    label_sets[id(d)] = (str(len(label_sets)), json.dumps(builtin).encode())
                items.append(
                    json.dumps(
                        {
                            "node": name,
                            "digest": rec.digest,
                            "groups": {f"{k}/{n}": h for k, n, h in parts},
                            "builtinLabels": label_sets[id(d)][0],
                            "nodeLabels": rt.service.node_labels(name),
                            "devicePluginResources": sorted(rec.device_plugin_resources),
                        }
                    )
                )
    body = b"".join(
        [
            b'{"items": [',
            ", ".join(items).encode(),
            b'], "groups": {',
            b", ".join(json.dumps(h).encode() + b": " + g for h, g in groups.items()),
            b'}, "labelSets": {',
            b", ".join(json.dumps(k).encode() + b": " + v for k, v in label_sets.values()),
            b'}, "metadata": ',
            json.dumps(meta).encode(),
            b"}",
        ]
    )
    return Response(body, media_type="application/json")
