"""What nfd did to nodes, for people: from the master's read API (decisions, origins,
what it rejected, when it last heard from the worker), or, when the master cannot be
read, from the Node objects' ownership annotations (what nfd wrote, nothing of why)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

KIND_WORDS = {
    "labels": "label",
    "annotations": "annotation",
    "extendedResources": "extended resource",
    "taints": "taint",
}


@dataclass
class Row:
    node: str
    in_sync: bool | None  # None: not known (read from the Node)
    labels: int
    extended_resources: int
    taints: int
    rejected: int | None
    first_rejected: str
    last_seen: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def first_rejection(rejected: Mapping[str, Mapping[str, str]]) -> tuple[int, str]:
    n, first = 0, ""
    for kind, items in rejected.items():
        for name, reason in items.items():
            n += 1
            if not first:
                first = f"{KIND_WORDS.get(kind, kind)} {name}: {reason}"
    return n, first


def row_from_master(item: Mapping[str, Any]) -> Row:
    n, first = first_rejection(item.get("rejected") or {})
    return Row(
        node=str(item.get("node")),
        in_sync=bool(item.get("inSync")),
        labels=len(item.get("labels") or {}),
        extended_resources=len(item.get("extendedResources") or {}),
        taints=len(item.get("taints") or []),
        rejected=n,
        first_rejected=first,
        last_seen=item.get("lastSeen"),
    )


def row_from_node(node: Mapping[str, Any]) -> Row:
    from nfd.master.publishing.prune import plan

    p = plan(node)
    return Row(
        node=p.name,
        in_sync=None,
        labels=len(p.labels),
        extended_resources=len(p.extended_resources),
        taints=len(p.taints),
        rejected=None,
        first_rejected="",
        last_seen=None,
    )


def table(rows: Iterable[Row]) -> str:
    head = ("NODE", "IN SYNC", "LABELS", "EXT. RESOURCES", "TAINTS", "REJECTED", "LAST HEARTBEAT")
    lines = [head]
    for r in rows:
        sync = "?" if r.in_sync is None else ("yes" if r.in_sync else "no")
        rej = "?" if r.rejected is None else (f"{r.rejected} ({r.first_rejected})" if r.rejected else "0")
        lines.append(
            (r.node, sync, str(r.labels), str(r.extended_resources), str(r.taints), rej, r.last_seen or "-")
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    return "".join(
        "   ".join(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)) + "   " + line[-1] + "\n"
        for line in lines
    )


def node_text(doc: Mapping[str, Any]) -> str:
    """The whole story of one node, as the master tells it."""
    out = [f"node {doc.get('node')}"]
    sync = "yes" if doc.get("inSync") else "no"
    out.append(
        f"  in sync: {sync} (decided {doc.get('updated')}, last seen on the Node {doc.get('published') or 'never'})"
    )
    out.append(
        f"  last heartbeat: {doc.get('lastSeen') or '-'}   worker version: {doc.get('nfdVersion') or '-'}"
    )
    if doc.get("lastError"):
        out.append(f"  last error: {doc['lastError']}")
    origins: Mapping[str, str] = doc.get("labelOrigins") or {}
    labels: Mapping[str, str] = doc.get("labels") or {}
    out.append(f"labels ({len(labels)}):")
    width = max((len(f"{k}={v}") for k, v in labels.items()), default=0)
    out += [f"  {f'{k}={v}'.ljust(width)}   {origins.get(k, '?')}" for k, v in labels.items()]
    for title, key in (("annotations", "annotations"), ("extended resources", "extendedResources")):
        items: Mapping[str, str] = doc.get(key) or {}
        if items:
            out.append(f"{title} ({len(items)}):")
            out += [f"  {k}={v}" for k, v in items.items()]
    taints = doc.get("taints") or []
    if taints:
        out.append(f"taints ({len(taints)}):")
        out += [
            f"  {t['key']}={t.get('value', '')}:{t['effect']}"
            if t.get("value")
            else f"  {t['key']}:{t['effect']}"
            for t in taints
        ]
    rejected = doc.get("rejected") or {}
    if any(rejected.values()):
        out.append("rejected:")
        for kind, items in rejected.items():
            out += [f"  {KIND_WORDS.get(kind, kind)} {name}: {reason}" for name, reason in items.items()]
    if doc.get("ruleErrors"):
        out.append("rule errors:")
        out += [f"  {e}" for e in doc["ruleErrors"]]
    if doc.get("devicePluginResources"):
        out.append(
            "served by device plugins or DRA (left to kubelet): " + ", ".join(doc["devicePluginResources"])
        )
    return "\n".join(out) + "\n"


def node_text_from_object(node: Mapping[str, Any]) -> str:
    """What nfd wrote on the Node, by its ownership annotations (no origins, no reasons)."""
    from nfd.master.publishing.prune import plan

    p = plan(node)
    labels = (node.get("metadata") or {}).get("labels") or {}
    out = [f"node {p.name} (from the Node object: origins, rejections and sync state need the master)"]
    out.append(f"labels ({len(p.labels)}):")
    out += [f"  {k}={labels.get(k, '')}" for k in p.labels]
    if p.annotations:
        out.append(f"annotations ({len(p.annotations)}):")
        out += [f"  {k}" for k in p.annotations]
    if p.extended_resources:
        out.append(f"extended resources ({len(p.extended_resources)}):")
        out += [f"  {k}" for k in p.extended_resources]
    if p.taints:
        out.append(f"taints ({len(p.taints)}):")
        out += [f"  {t}" for t in p.taints]
    return "\n".join(out) + "\n"
