"""Bringing Node objects to their records' decisions, and keeping track of what the API
server holds: one node at a time (``sync``), every node at once from a paginated LIST
(``resync``), and each change the Node watch (``nfd.master.core.watch``) reports
(``observe_event``).

What the master believes of each Node is its record's ``observed``; a node whose Node
no longer matches (re-created with a new uid, labels or extended resources removed by
someone) is marked out of sync and handed to ``requeue``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from nfd.master.core.kube import NODES, KubeApi
from nfd.master.core.metrics import Metrics
from nfd.master.core.state import NodeRecord, NodeStore, Observed, now
from nfd.master.core.watch import Pages
from nfd.master.publishing.patches import merge_patch, node_patch, observe, status_patch

log = logging.getLogger(__name__)


def _newer(rv: str, than: int | str) -> bool:
    """resourceVersions are opaque, but the API server's are integers that grow (and
    kept as such, ``patches.observe``): an event older than what a PATCH answer already
    showed is dropped."""
    if isinstance(than, int) and rv.isdigit():
        return int(rv) > than
    return rv != str(than)


def _drifted(rec: NodeRecord, obs: Observed) -> bool:
    dpr = rec.device_plugin_resources
    return bool(
        node_patch(rec.decision, obs, device_plugin_resources=dpr)
        or status_patch(rec.decision, obs, device_plugin_resources=dpr)
    )


class NodeSync:
    def __init__(
        self,
        *,
        api: KubeApi,
        store: NodeStore,
        metrics: Metrics,
        list_page_size: int,
        requeue: Callable[[str], None],
        busy: Callable[[str], bool],
    ) -> None:
        self.api = api
        self.store = store
        self.metrics = metrics
        self.list_page_size = list_page_size
        self.requeue = requeue
        self.busy = busy
        # What the last LIST (and the watch since) showed of Nodes the master holds no
        # features for yet: their first write needs no GET (10,000 nodes: one LIST
        # instead of 10,000 GETs).
        self.seen: dict[str, Observed] = {}

    async def sync(self, name: str) -> None:
        """Bring one Node to its record's decision. Writes nothing when it matches."""
        rec = self.store.get(name)
        if rec is None:
            return
        if rec.observed is None and name in self.seen:
            rec.observed = self.seen.pop(name)
            if not self.seen:  # a dict never shrinks: let the whole fleet's table go
                self.seen = {}
        if rec.observed is None:
            node = await self.api.get_node(name)
            rec = self.store.get(name)
            if rec is None:
                return
            rec.observed = observe(node, rec.decision)
        obs = rec.observed
        decision, dpr = rec.decision, rec.device_plugin_resources
        ops = node_patch(decision, obs, device_plugin_resources=dpr)
        sops = status_patch(decision, obs, device_plugin_resources=dpr)

        # What is kept of each answer is taken as soon as it is parsed (``KubeApi.patch_node``).
        def keep(node: dict[str, Any]) -> Observed:
            return observe(node, decision)

        # Sent as merge patches: the same change, for less of the API server's CPU.
        if ops:
            rec.observed = await self.api.patch_node(name, merge_patch(ops) or ops, keep)
        if sops:
            rec.observed = await self.api.patch_node_status(name, merge_patch(sops) or sops, keep)
        if ops or sops:
            self.metrics.updates.inc()
            log.debug("node %s: %d node ops, %d status ops", name, len(ops), len(sops))
        rec.last_error, rec.node_missing = "", False
        if rec.decision is decision:
            rec.published = now()

    async def resync(self, pages: Pages | None = None, *, prime: bool = False) -> tuple[set[str], float]:
        """One paginated LIST (``pages``, the Node watch's; else one of its own): refresh
        what the master believes of each known Node and queue the nodes that drifted.
        ``prime``: also remember Nodes without features yet (start, new leadership).
        Answers the names listed, and when the listing began (monotonic)."""
        started = time.monotonic()
        listed: set[str] = set()
        if prime:
            self.seen.clear()
        if pages is None:
            pages = (
                page.get("items") or [] async for page in self.api.pages(NODES, limit=self.list_page_size)
            )
        async for items in pages:
            for node in items:
                name = (node.get("metadata") or {}).get("name")
                if not name:
                    continue
                listed.add(name)
                rec = self.store.get(name)
                if rec is None and prime:
                    self.seen[name] = observe(node, None)
                if rec is None or self.busy(name):
                    continue
                rec.observed = obs = observe(node, rec.decision)
                if _drifted(rec, obs):
                    self.requeue(name)
        return listed, started

    def observe_event(self, kind: str, node: dict[str, Any]) -> None:
        """A Node watch event. A Node that no longer matches its record's decision
        (deleted, re-created, our labels or resources removed) is out of sync until
        written again, and is queued at once."""
        meta = node.get("metadata") or {}
        name = str(meta.get("name") or "")
        rec = self.store.get(name)
        if rec is None:
            if kind == "DELETED":
                self.seen.pop(name, None)
            elif kind == "ADDED" or name in self.seen:
                self.seen[name] = observe(node, None)
            return
        if self.busy(name):
            return  # the write under way answers with the newest Node
        if kind == "DELETED":
            rec.observed, rec.published = None, None
            log.info("node %s: deleted from the cluster; out of sync until it returns", name)
            return
        rv = str(meta.get("resourceVersion") or "")
        if rec.observed is not None and not _newer(rv, rec.observed.resource_version):
            return  # our own write, or older
        rec.observed = obs = observe(node, rec.decision)
        if _drifted(rec, obs):
            if rec.published is not None:
                log.info("node %s: no longer carries what the master applies; writing it again", name)
            rec.published = None
            self.requeue(name)
