"""Garbage collection, as upstream's nfd-gc does it: NodeFeature objects of nodes that no
longer exist are deleted, and the master forgets what it holds for such nodes. Only the
leader collects (a follower's view may be stale, and two collectors would race); it runs
as one of the master's periodic jobs (``jobs``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from nfd.kube.errors import ApiError
from nfd.master.core.jobs import Jobs
from nfd.master.core.kube import NODES, KubeApi
from nfd.master.core.metrics import Metrics
from nfd.master.decisions.service import MasterService
from nfd.master.watches.nodefeatures import NodeFeatureIndex
from nfd.nodefeature import GROUP, PLURAL, VERSION

log = logging.getLogger(__name__)

JOB_ID = "nfd-master-gc"
# Nodes a LIST page. Only their names are needed, but a page comes whole (a labelled Node
# is ~15 kB of JSON, several times that parsed), and is parsed on whichever of the API
# client's threads answers it (each thread's malloc arena, most likely, keeps its
# largest page as RSS). 500 a page grew a master of 2,000 nodes by up to ~18 MiB a
# round, to 400 MiB in 30 minutes of collecting every minute.
PAGE_SIZE_MAX = 50
KIND = "NodeFeature"  # the ``kind`` label of the gc series


@dataclass
class GcResult:
    nodes: int = 0
    deleted: int = 0
    forgotten: int = 0
    failed: int = 0
    skipped: str = ""  # why nothing was done


class GarbageCollector:
    def __init__(
        self,
        *,
        api: KubeApi,
        service: MasterService,
        index: NodeFeatureIndex | None,
        interval_s: float,
        page_size: int,
        is_leader: Callable[[], bool],
        metrics: Metrics | None = None,
    ) -> None:
        self.api = api
        self.service = service
        self.index = index
        self.interval_s = interval_s
        self.page_size = page_size
        self.is_leader = is_leader
        self.metrics = metrics
        self.last: GcResult | None = None

    async def _node_names(self) -> set[str]:
        return {
            str((n.get("metadata") or {}).get("name"))
            async for page in self.api.pages(NODES, limit=min(self.page_size, PAGE_SIZE_MAX))
            for n in page.get("items") or []
        }

    async def collect(self) -> GcResult:
        """One round. Never raises: a failed round is logged and the next one retries."""
        if not self.is_leader():
            self.last = GcResult(skipped="not the leader")
            return self.last
        out = GcResult()
        try:
            nodes = await self._node_names()
        except ApiError as e:
            log.warning("garbage collection: cannot list nodes (%s); next round retries", e)
            self.last = GcResult(skipped=f"cannot list nodes: {e}")
            return self.last
        out.nodes = len(nodes)
        if self.index is not None:
            for (ns, name), obj in sorted(self.index.objects.items()):
                if not obj.node or obj.node in nodes:
                    continue
                try:
                    await self.api.delete_custom(GROUP, VERSION, ns, PLURAL, name)
                    out.deleted += 1
                    if self.metrics is not None:
                        self.metrics.gc_deleted.labels(kind=KIND).inc()
                    log.info(
                        "garbage collection: deleted NodeFeature %s/%s of gone node %s", ns, name, obj.node
                    )
                except ApiError as e:
                    if e.status == 404:
                        continue
                    out.failed += 1
                    if self.metrics is not None:
                        self.metrics.gc_delete_failures.labels(kind=KIND).inc()
                    log.warning("garbage collection: cannot delete NodeFeature %s/%s: %s", ns, name, e)
        for rec in list(self.service.store):
            if rec.name not in nodes:
                self.service.forget(rec.name)
                out.forgotten += 1
        self.last = out
        return out

    def start(self, jobs: Jobs) -> None:
        jobs.every(self.interval_s, self.collect, job_id=JOB_ID)
