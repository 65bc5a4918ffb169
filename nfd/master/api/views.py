"""A node's record as the API shows it: plain dicts, serialised once (the steady-state
answers are built often; a pydantic round trip per answer costs more than the work)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from nfd.master.core.state import NodeRecord


def _ts(t: datetime | float | None) -> str | None:
    """ISO 8601 in UTC; a float is a record's wall-clock instant (``state.now``)."""
    if t is None:
        return None
    if isinstance(t, float):
        t = datetime.fromtimestamp(t, UTC)
    return t.isoformat().replace("+00:00", "Z")


def response_dict(rec: NodeRecord) -> dict[str, Any]:
    """The PUT answer (NodeResponse)."""
    d = rec.decision
    return {
        "node": rec.name,
        "digest": rec.own_digest,
        "labels": d.labels,
        "annotations": d.annotations,
        "extendedResources": d.extended_resources,
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in d.taints],
        "rejected": {
            k: d.rejected.get(k, {}) for k in ("labels", "annotations", "extendedResources", "taints")
        },
        "updated": _ts(rec.updated),
    }


def response_json(rec: NodeRecord) -> bytes:
    """``json.dumps(response_dict(rec))``, byte for byte, with the decision's part
    serialised once per decision (nodes share decisions; a fleet's labels are one)."""
    d = rec.decision
    middle = d.__dict__.get("_response_json")
    if middle is None:
        whole = response_dict(rec)
        del whole["node"], whole["digest"], whole["updated"]
        middle = json.dumps(whole)[1:-1]
        d.__dict__["_response_json"] = middle  # frozen dataclass: a cache, not state
    return (
        f'{{"node": {json.dumps(rec.name)}, "digest": {json.dumps(rec.own_digest)}, {middle}, '
        f'"updated": {json.dumps(_ts(rec.updated))}}}'
    ).encode()


def _wall(monotonic: float) -> datetime | None:
    """A monotonic instant as wall-clock time (None for 0: never)."""
    if not monotonic:
        return None
    return (datetime.now(UTC) - timedelta(seconds=time.monotonic() - monotonic)).replace(microsecond=0)


def status_json(rec: NodeRecord) -> bytes:
    """The GET answer (NodeStatus): the PUT answer and the publishing state, built on
    ``response_json`` (a page of nodes costs a few string joins per node)."""
    extra = {
        "nfdVersion": rec.nfd_version,
        "devicePluginResources": sorted(rec.device_plugin_resources),
        "published": _ts(rec.published),
        "lastSeen": _ts(_wall(rec.last_seen)),
        "inSync": rec.published is not None and rec.published >= rec.updated and not rec.last_error,
        "lastError": rec.last_error,
        "ruleErrors": list(rec.decision.rule_errors),
        "labelOrigins": {
            k: rec.label_objects.get(k, o) if o == "NodeFeature" else o
            for k, o in rec.decision.origins.items()
        },
    }
    return response_json(rec)[:-1] + b", " + json.dumps(extra)[1:].encode()
