"""The one list-then-watch loop, for every collection the master follows (Nodes,
NodeFeatureRules, NodeFeatures, NodeFeatureGroups, the workers' pods): a paginated LIST,
then a watch from its resourceVersion, with bookmarks, in a background thread. A watch
the server ends resumes at once from the last resourceVersion seen, and so does a broken
one (after a backoff), so a change never costs a LIST; only an expired resourceVersion
(410 Gone) lists again. What the objects mean is the owner's: ``on_list`` reads a
LIST's pages, ``on_event`` takes each change; both run on the event loop."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from concurrent.futures import Future
from typing import Any

from nfd.backoff import Backoff
from nfd.master.apierrors import KubeError, from_exception
from nfd.master.kube import KubeApi, Resource

log = logging.getLogger(__name__)

Pages = AsyncIterator[list[dict[str, Any]]]  # the items of each page of one LIST
GONE = 410


def object_key(obj: dict[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an API object."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class ListWatch:
    """``absent``: LIST statuses that mean "there are none" rather than a failure (404:
    the CRD is not installed; 403 on the first LIST: no rights to read them, and the rest
    of the master works on without them; a 403 on a later LIST keeps what was listed). ``relist_after_break``: a broken watch lists again instead
    of resuming, for an owner whose ``live`` must mean no gap since a LIST."""

    def __init__(
        self,
        *,
        api: KubeApi,
        resource: Resource,
        page_size: int,
        on_list: Callable[[Pages], Awaitable[None]],
        on_event: Callable[[str, dict[str, Any]], None],
        on_synced: Callable[[], None] | None = None,
        absent: Collection[int] = (),
        relist_after_break: bool = False,
    ) -> None:
        self.api = api
        self.resource = resource
        self.page_size = page_size
        self.on_list = on_list
        self.on_event = on_event
        self.on_synced = on_synced
        self.absent = absent
        self.relist_after_break = relist_after_break
        self.synced = False  # listed at least once
        self.live = False  # listed, and the watch has not broken since
        self._rv = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: Any = None  # the watch response being read
        self._loop: asyncio.AbstractEventLoop | None = None
        self._relisting: Future[None] | None = None  # the thread's LIST on the event loop

    async def start(self) -> None:
        """List, then watch; a LIST that fails is tried again in the background."""
        try:
            await self.relist()
        except KubeError as e:
            log.warning("cannot list %s yet (%s); trying again in the background", self.resource.plural, e)
        self.watch_in_background()

    def watch_in_background(self) -> None:
        """Start the watch thread, unless it runs; it lists first when no LIST succeeded."""
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._thread = threading.Thread(
                target=self._run, name=f"{self.resource.plural}-watch", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.live = False
        relisting = self._relisting
        if relisting is not None:
            relisting.cancel()
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown()  # unblocks the thread's read
            except (OSError, ValueError, RuntimeError):  # released meanwhile: nothing to unblock
                pass
            except AttributeError:  # urllib3 before 2.3: the thread stops at its next line
                pass

    async def relist(self) -> None:
        """One paginated LIST through ``on_list``; the watch goes on from its
        resourceVersion. Raises KubeError."""
        rv = ""

        async def pages() -> Pages:
            nonlocal rv
            try:
                async for page in self.api.pages(self.resource, limit=self.page_size):
                    rv = rv or str((page.get("metadata") or {}).get("resourceVersion") or "")
                    yield [o for o in page.get("items") or [] if isinstance(o, dict)]
            except KubeError as e:
                # Once listed, a 403 is a rights problem that may pass (an RBAC change
                # being rolled out): keep what was listed and try again, rather than take
                # every object away. A 404 means the CRD went, and its objects with it.
                if e.status not in self.absent or (e.status == 403 and self.synced):
                    raise
                if e.status == 403:
                    log.error("not allowed to list %s (%s): going on without them", self.resource.plural, e)

        await self.on_list(pages())
        self._rv, self.live = rv, True
        if not self.synced:
            self.synced = True
            if self.on_synced is not None:
                self.on_synced()

    def _run(self) -> None:
        assert self._loop is not None
        # A few clients (the master's replicas), not a fleet: exact steps.
        backoff, expired = Backoff(initial=0.5, cap=30.0, jitter=0), not self.synced
        while not self._stop.is_set():
            if not expired:
                began = time.monotonic()
                try:
                    if self._watch():
                        backoff.reset()
                    # The server ended the watch (its timeout): resume at once, unless it
                    # ended as soon as it began (a server that ends each one is not hammered).
                    if time.monotonic() - began > 1.0:
                        continue
                except Exception as e:
                    err = from_exception(e)
                    log.info("%s watch interrupted: %s", self.resource.plural, err)
                    self.live = False
                    expired = err.status == GONE or self.relist_after_break
            if self._stop.wait(backoff.next_delay()):
                return
            if expired:
                try:
                    self._relist_from_thread()
                    expired = False
                except Exception as e:
                    log.info("%s relist failed: %s", self.resource.plural, e)

    def _relist_from_thread(self) -> None:
        """``relist`` on the event loop, waited for to its end: a slow LIST is never
        given up on while it still runs (the next would run beside it, and the older one,
        ending last, would leave its older view). ``stop`` cancels it."""
        assert self._loop is not None
        self._relisting = fut = asyncio.run_coroutine_threadsafe(self.relist(), self._loop)
        if self._stop.is_set():  # stopped meanwhile: stop() may not have seen it
            fut.cancel()
        try:
            fut.result()
        finally:
            self._relisting = None

    def _watch(self) -> bool:
        """One watch, until the server ends it or it breaks (raises); whether any event
        came. Each event is handed to the event loop."""
        from kubernetes.watch.watch import iter_resp_lines

        assert self._loop is not None
        got = False
        self._resp = resp = self.api.open_watch(self.resource, self._rv)
        try:
            if self._stop.is_set():  # stopped while it opened, too soon to shut it down
                return got
            for line in iter_resp_lines(resp):  # type: ignore[no-untyped-call]
                if self._stop.is_set():
                    break
                ev = json.loads(line) if line else {}
                kind, obj = str(ev.get("type")), ev.get("object")
                if not isinstance(obj, dict):
                    continue
                if kind == "ERROR":  # 410 Gone (expired) and the like
                    raise KubeError(int(obj.get("code") or 0) or None, str(obj.get("message") or obj))
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    self._rv = str(rv)
                if kind != "BOOKMARK":
                    self._loop.call_soon_threadsafe(self.on_event, kind, obj)
                got = True
        finally:
            self._resp = None
            resp.close()  # a stream left midway must not go back to the pool as it is
            resp.release_conn()
        return got
