"""Writing decisions to Node objects: the embedded mode's stand-in, and the Kubernetes
publisher (a work queue driving the node sync, a periodic resync and a Node watch)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from nfd.kube.errors import ApiError, NotFound
from nfd.master.core import nodeview
from nfd.master.core.jobs import Jobs
from nfd.master.core.kube import NODES, KubeApi
from nfd.master.core.metrics import Metrics
from nfd.master.core.settings import KubeSettings
from nfd.master.core.state import NodeStore, now
from nfd.master.core.watch import ListWatch, Pages
from nfd.master.publishing.nodesync import NodeSync
from nfd.master.publishing.workqueue import WorkQueue

log = logging.getLogger(__name__)

RESYNC_JOB_ID = "nfd-master-resync"


class Publisher(Protocol):
    mode: str

    def enqueue(self, name: str) -> None: ...

    def enqueue_all(self, *, reread: bool = False) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def idle(self) -> bool: ...


class MemoryPublisher:
    """Embedded mode: nothing leaves the process; a decision counts as applied at once."""

    mode = "memory"

    def __init__(self, store: NodeStore) -> None:
        self.store = store

    def enqueue(self, name: str) -> None:
        rec = self.store.get(name)
        if rec is not None:
            rec.published = now()

    def enqueue_all(self, *, reread: bool = False) -> None:
        for rec in self.store:
            rec.published = now()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def idle(self) -> bool:
        return True


class KubePublisher:
    """The work queue (``workqueue``) driving the node sync (``nodesync``), the full
    resync on a timer, and the Node watch that notices Nodes changed behind the
    master's back."""

    mode = "kubernetes"

    def __init__(
        self,
        *,
        api: KubeApi,
        store: NodeStore,
        settings: KubeSettings,
        metrics: Metrics,
        may_write: Callable[[], bool],
        jobs: Jobs,
        on_gone: Callable[[str], None] | None = None,
    ) -> None:
        self.on_gone = on_gone
        self.jobs = jobs
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.may_write = may_write
        self.primed = asyncio.Event()
        self.queue = WorkQueue(
            handle=self._sync,
            ready=lambda: self.may_write() and self.primed.is_set(),
            on_failure=self._failed,
            on_depth=metrics.queue_depth.set,
            workers=settings.parallelism,
            backoff_base_s=settings.backoff_base_s,
            backoff_max_s=settings.backoff_max_s,
        )
        self.nodes = NodeSync(
            api=api,
            store=store,
            metrics=metrics,
            list_page_size=settings.list_page_size,
            requeue=self.queue.add,
            busy=self.queue.busy.__contains__,
        )
        # Its LISTs are the node sync's, which keeps a few keys of each Node as it reads.
        self.watch = ListWatch(
            api=api,
            resource=NODES,
            page_size=settings.list_page_size,
            on_list=self._listed,
            on_event=self._on_event,
            decode=nodeview.event,  # the keys NodeSync reads, the rest left unparsed
        )
        self._prime_task: asyncio.Task[None] | None = None

    # -- queue ------------------------------------------------------------------------
    def enqueue(self, name: str) -> None:
        self.queue.add(name)

    def enqueue_all(self, *, reread: bool = False) -> None:
        for rec in self.store:
            if reread:
                rec.observed = None
            self.queue.add(rec.name)

    def idle(self) -> bool:
        return self.queue.idle()

    def resume(self) -> None:
        """This instance may write now (it became the leader, or the rules are known):
        read every Node afresh, another master may have written meanwhile."""
        for rec in self.store:
            rec.observed = None
        self.nodes.seen.clear()
        self.primed.clear()
        if self._prime_task is None or self._prime_task.done():
            self._prime_task = asyncio.get_running_loop().create_task(self._prime())

    def conditions_met(self) -> None:
        """The cluster's rules, or its NodeFeature objects, are listed now: start writing
        if this instance may. Unlike ``resume`` (leadership changed), the Nodes are not
        listed again when they already were."""
        if not self.may_write():
            return
        if self._prime_task is None:
            self.resume()
        elif self.primed.is_set():
            self.queue.release()

    async def _prime(self) -> None:
        try:
            await self.watch.relist()
        except ApiError as e:  # each node is read on its own instead
            log.warning("could not list nodes (%s); reading each before its first write", e)
        finally:
            self.primed.set()
            self.queue.release()
            self.enqueue_all()
        self.watch.watch_in_background()

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        self.queue.start()
        self.jobs.every(self.settings.resync_period_s, self._resync_round, job_id=RESYNC_JOB_ID)
        if self.may_write() and self._prime_task is None:
            self.resume()

    async def stop(self) -> None:
        self.watch.stop()
        self.jobs.cancel(RESYNC_JOB_ID)
        if self._prime_task is not None:
            self._prime_task.cancel()
            await asyncio.gather(self._prime_task, return_exceptions=True)
        await self.queue.stop()

    # -- work -------------------------------------------------------------------------
    async def _sync(self, name: str) -> None:
        await self.nodes.sync(name)

    async def sync(self, name: str) -> None:
        """Bring one Node to its record's decision now (tests, tools)."""
        await self.nodes.sync(name)

    def _failed(self, name: str, e: ApiError) -> bool:
        """Note a failed write on the node's record; False: do not retry it."""
        rec = self.store.get(name)
        self.metrics.update_failures.labels(reason=e.reason).inc()
        if isinstance(e, NotFound):
            # No such Node: retrying cannot help. The Node watch (the Node registers),
            # the node's next features request or the resync try again.
            if rec is not None:
                rec.observed, rec.node_missing = None, True
                rec.last_error = (
                    f"no Node {name!r} in the cluster; not retried until it is listed or sends features"
                )
            log.warning("node %s: no such Node in the cluster; not retried", name)
            return False
        if rec is not None:
            rec.last_error = str(e)
            if e.view_stale:
                rec.observed = None  # 409, 422 ...: read the Node again first
        return True

    def _on_event(self, kind: str, node: dict[str, Any]) -> None:
        if self.may_write():
            self.nodes.observe_event(kind, node)

    async def _listed(self, pages: Pages) -> None:
        await self.nodes.resync(pages, prime=True)

    async def _resync_round(self) -> None:
        if not self.may_write():
            return
        try:
            await self.resync()
        except ApiError as e:
            log.warning("resync failed: %s", e)

    async def resync(self) -> None:
        """One paginated LIST: queue the nodes that drifted, and forget those missing
        from it whose workers have been silent for a whole resync period before it began
        (deleted, scaled away). A worker that came just before its Node registered is
        not forgotten by the LIST that happens to run in between."""
        listed, started = await self.nodes.resync()
        silent_since = started - self.settings.resync_period_s
        for rec in self.store:
            if rec.name not in listed and rec.last_seen < silent_since and rec.name not in self.queue.busy:
                self.queue.forget(rec.name)
                if self.on_gone is not None:
                    self.on_gone(rec.name)
