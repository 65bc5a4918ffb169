"""Writing decisions to Node objects.

A work queue of node names (a name queued twice is queued once: the newest decision is
read when the node's turn comes, so older ones are never written), drained by a fixed
number of workers through the rate-limited client. Failed writes are retried with
exponential backoff and jitter; a conflict or an unexpected answer drops what the master
believed about the Node, so the next attempt reads it again and recomputes the patch.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Protocol

from nfd.master.kube import KubeApi, KubeError
from nfd.master.metrics import Metrics
from nfd.master.patches import node_patch, observe, status_patch
from nfd.master.settings import KubeSettings
from nfd.master.state import NodeStore, Observed, now

log = logging.getLogger(__name__)


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
    mode = "kubernetes"

    def __init__(
        self,
        *,
        api: KubeApi,
        store: NodeStore,
        settings: KubeSettings,
        metrics: Metrics,
        may_write: Callable[[], bool],
        on_gone: Callable[[str], None] | None = None,
    ) -> None:
        self.on_gone = on_gone
        self.api = api
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self.may_write = may_write
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._busy: set[str] = set()
        self._dirty: set[str] = set()  # queued again while a worker held it
        self._waiting: set[str] = set()  # parked until this instance may write
        # What one paginated LIST showed of Nodes the master holds no features for yet:
        # their first write needs no GET (10,000 nodes: one LIST instead of 10,000 GETs).
        self._seen: dict[str, Observed] = {}
        self._prime_task: asyncio.Task[None] | None = None
        self.primed = asyncio.Event()
        self._attempts: dict[str, int] = {}
        self._retry_handles: dict[str, asyncio.TimerHandle] = {}
        self._tasks: list[asyncio.Task[None]] = []

    # -- queue ------------------------------------------------------------------------
    def enqueue(self, name: str) -> None:
        handle = self._retry_handles.pop(name, None)
        if handle is not None:  # new data: try now rather than after the backoff
            handle.cancel()
        if name in self._busy:
            self._dirty.add(name)
        elif name not in self._queued:
            self._queued.add(name)
            self._queue.put_nowait(name)
        self.metrics.queue_depth.set(len(self._queued))

    def enqueue_all(self, *, reread: bool = False) -> None:
        for rec in self.store:
            if reread:
                rec.observed = None
            self.enqueue(rec.name)

    def resume(self) -> None:
        """This instance may write now (it became the leader, or the rules are known):
        read every Node afresh, another master may have written meanwhile."""
        self._waiting.clear()
        for rec in self.store:
            rec.observed = None
        self._seen.clear()
        self.primed.clear()
        if self._prime_task is None or self._prime_task.done():
            self._prime_task = asyncio.get_running_loop().create_task(self._prime())

    async def _prime(self) -> None:
        try:
            await self.resync(prime=True)
        except KubeError as e:  # each node is read on its own instead
            log.warning("could not list nodes (%s); reading each before its first write", e)
        finally:
            self.primed.set()
            self.enqueue_all()

    def idle(self) -> bool:
        return not self._queued and not self._busy and not self._retry_handles

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        for i in range(self.settings.parallelism):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"publisher-{i}"))
        self._tasks.append(asyncio.create_task(self._resync_loop(), name="resync"))
        if self.may_write() and self._prime_task is None:
            self.resume()

    async def stop(self) -> None:
        if self._prime_task is not None:
            self._tasks.append(self._prime_task)
        for h in self._retry_handles.values():
            h.cancel()
        self._retry_handles.clear()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    # -- work -------------------------------------------------------------------------
    async def _worker(self) -> None:
        while True:
            name = await self._queue.get()
            self._queued.discard(name)
            self.metrics.queue_depth.set(len(self._queued))
            if not self.may_write() or not self.primed.is_set():
                self._waiting.add(name)
                continue
            self._busy.add(name)
            try:
                await self._sync_once(name)
            finally:
                self._busy.discard(name)
                if name in self._dirty:
                    self._dirty.discard(name)
                    self.enqueue(name)

    async def _sync_once(self, name: str) -> None:
        try:
            await self.sync(name)
        except KubeError as e:
            self._failed(name, e)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug must not kill the worker; retry like a fault
            log.exception("node %s: unexpected error while publishing", name)
            self._failed(name, KubeError(None, f"{type(e).__name__}: {e}"))
        else:
            self._attempts.pop(name, None)

    def _failed(self, name: str, e: KubeError) -> None:
        rec = self.store.get(name)
        reason = str(e.status) if e.status else "unreachable"
        self.metrics.update_failures.labels(reason=reason).inc()
        if e.status == 404:
            # No such Node: retrying cannot help. The node's next features request or
            # the resync's listing (it exists by then) try again.
            self._attempts.pop(name, None)
            if rec is not None:
                rec.observed, rec.node_missing = None, True
                rec.last_error = f"no Node {name!r} in the cluster; not retried until it is listed or sends features"
            log.warning("node %s: no such Node in the cluster; not retried", name)
            return
        if rec is not None:
            rec.last_error = str(e)
            if e.status not in (429, None) and not (e.status and e.status >= 500):
                rec.observed = None  # 409, 404, 422 ...: read the Node again first
        n = self._attempts.get(name, 0)
        self._attempts[name] = n + 1
        delay = min(self.settings.backoff_max_s, self.settings.backoff_base_s * (2**n))
        delay = random.uniform(delay / 2, delay)  # jitter: a fleet must not retry in step
        if e.retry_after:
            delay = max(delay, min(e.retry_after, self.settings.backoff_max_s))
        log.info("node %s: write failed (%s); retry in %.2fs", name, e, delay)
        loop = asyncio.get_running_loop()
        self._retry_handles[name] = loop.call_later(delay, self._retry, name)

    def _retry(self, name: str) -> None:
        self._retry_handles.pop(name, None)
        self.enqueue(name)

    async def sync(self, name: str) -> None:
        """Bring one Node to its record's decision. Writes nothing when it matches."""
        rec = self.store.get(name)
        if rec is None:
            return
        if rec.observed is None and name in self._seen:
            rec.observed = self._seen.pop(name)
        if rec.observed is None:
            self.metrics.api_requests.labels(verb="get", resource="nodes").inc()
            node = await self.api.get_node(name)
            rec = self.store.get(name)
            if rec is None:
                return
            rec.observed = observe(node, rec.decision)
        obs = rec.observed
        assert obs is not None
        decision, dpr = rec.decision, rec.device_plugin_resources
        ops = node_patch(decision, obs, device_plugin_resources=dpr)
        sops = status_patch(decision, obs, device_plugin_resources=dpr)
        if ops:
            self.metrics.api_requests.labels(verb="patch", resource="nodes").inc()
            node = await self.api.patch_node(name, ops)
            rec.observed = observe(node, decision)
        if sops:
            self.metrics.api_requests.labels(verb="patch", resource="nodes/status").inc()
            node = await self.api.patch_node_status(name, sops)
            rec.observed = observe(node, decision)
        if ops or sops:
            self.metrics.updates.inc()
            log.debug("node %s: %d node ops, %d status ops", name, len(ops), len(sops))
        rec.last_error, rec.node_missing = "", False
        if rec.decision is decision:
            rec.published = now()

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync_period_s)
            if not self.may_write():
                continue
            try:
                await self.resync()
            except KubeError as e:
                log.warning("resync failed: %s", e)

    async def resync(self, *, prime: bool = False) -> None:
        """One paginated LIST: refresh what the master believes of each known Node, then
        queue the nodes that drifted (say, re-created with extended resources zeroed).
        ``prime``: also remember Nodes without features yet (start, new leadership)."""
        cont: str | None = None
        started = time.monotonic()
        listed: set[str] = set()
        while True:
            self.metrics.api_requests.labels(verb="list", resource="nodes").inc()
            page = await self.api.list_nodes(limit=self.settings.list_page_size, cont=cont)
            for node in page.get("items") or []:
                name = (node.get("metadata") or {}).get("name")
                if name:
                    listed.add(name)
                rec = self.store.get(name) if name else None
                if rec is None and name and prime:
                    self._seen[name] = observe(node, None)
                if rec is None or name in self._busy:
                    continue
                rec.observed = obs = observe(node, rec.decision)
                dpr = rec.device_plugin_resources
                if node_patch(rec.decision, obs, device_plugin_resources=dpr) or status_patch(
                    rec.decision, obs, device_plugin_resources=dpr
                ):
                    self.enqueue(rec.name)
            cont = (page.get("metadata") or {}).get("continue") or None
            if not cont:
                break
        # Nodes missing from a complete listing whose workers have been silent since it
        # began are gone (deleted, scaled away).
        for rec in self.store:
            if rec.name not in listed and rec.last_seen < started and rec.name not in self._busy:
                handle = self._retry_handles.pop(rec.name, None)
                if handle is not None:
                    handle.cancel()
                self._attempts.pop(rec.name, None)
                if self.on_gone is not None:
                    self.on_gone(rec.name)
