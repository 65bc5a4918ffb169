"""The master's list-then-watch, for every collection it follows (Nodes,
NodeFeatureRules, NodeFeatures, NodeFeatureGroups, the workers' pods): a paginated LIST
on the event loop, then ``nfd.kube.listwatch``'s loop (the one the per-node agents use)
watching from its resourceVersion, with bookmarks, in a background thread. A watch
the server ends resumes at once from the last resourceVersion seen, and so does a broken
one (after a backoff), so a change never costs a LIST; only an expired resourceVersion
(410 Gone) lists again. What the objects mean is the owner's: ``on_list`` reads a
LIST's pages, ``on_event`` takes each change; both run on the event loop."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from concurrent.futures import Future
from typing import Any

from nfd.backoff import Backoff
from nfd.kube.errors import ApiError
from nfd.kube.heavy import from_exception, lines
from nfd.kube.listwatch import WatchLoop
from nfd.master.core.kube import KubeApi, Resource

log = logging.getLogger(__name__)

Pages = AsyncIterator[list[dict[str, Any]]]  # the items of each page of one LIST


def object_key(obj: dict[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an API object."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class ListWatch:
    """``absent``: LIST statuses that mean "there are none" rather than a failure (404:
    the CRD is not installed; 403 on the first LIST: no rights to read them, and the rest
    of the master works on without them; a 403 on a later LIST keeps what was listed). ``relist_after_break``: a broken watch lists again instead
    of resuming, for an owner whose ``live`` must mean no gap since a LIST. ``decode``:
    each event's JSON line to Python (the Node watch keeps only what it reads)."""

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
        decode: Callable[[bytes], dict[str, Any]] = json.loads,
    ) -> None:
        self.api = api
        self.resource = resource
        self.page_size = page_size
        self.on_list = on_list
        self.on_event = on_event
        self.on_synced = on_synced
        self.absent = absent
        self.relist_after_break = relist_after_break
        self.decode = decode
        self.synced = False  # listed at least once
        self.live = False  # listed, and the watch has not broken since
        self._rv = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp: Any = None  # the watch response being read
        self._loop: asyncio.AbstractEventLoop | None = None
        self._relisting: Future[None] | None = None  # the thread's LIST on the event loop
        self._watcher: WatchLoop | None = None

    async def start(self) -> None:
        """List, then watch; a LIST that fails is tried again in the background."""
        try:
            await self.relist()
        except ApiError as e:
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
        resourceVersion. Raises ApiError."""
        rv = ""

        async def pages() -> Pages:
            nonlocal rv
            try:
                async for page in self.api.pages(self.resource, limit=self.page_size):
                    rv = rv or str((page.get("metadata") or {}).get("resourceVersion") or "")
                    yield [o for o in page.get("items") or [] if isinstance(o, dict)]
            except ApiError as e:
                # Once listed, a 403 is a rights problem that may pass (an RBAC change
                # being rolled out): keep what was listed and try again, rather than take
                # every object away. A 404 means the CRD went, and its objects with it.
                if e.status not in self.absent or (e.status == 403 and self.synced):
                    raise
                if e.status == 403:
                    log.error("not allowed to list %s (%s): going on without them", self.resource.plural, e)

        await self.on_list(pages())
        self._rv, self.live = rv, True
        if self._watcher is not None:  # a LIST asked for here: the watch goes on from it
            self._watcher.resource_version = rv
        if not self.synced:
            self.synced = True
            if self.on_synced is not None:
                self.on_synced()

    def _run(self) -> None:
        assert self._loop is not None
        loop = self._loop

        def relist() -> str:
            self._relist_from_thread()
            return self._rv

        def broken() -> None:
            self.live = False

        self._watcher = WatchLoop(
            name=self.resource.plural,
            relist=relist,
            open_watch=self._events,
            on_event=lambda kind, obj: loop.call_soon_threadsafe(self.on_event, kind, obj),
            # A few clients (the master's replicas), not a fleet: exact steps.
            backoff=Backoff(initial=0.5, cap=30.0, jitter=0),
            stop=self._stop,
            relist_after_break=self.relist_after_break,
            on_broken=broken,
        )
        self._watcher.run(self._rv if self.synced else "")

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

    def _events(self, rv: str) -> Iterator[dict[str, Any]]:
        """One watch from ``rv``, its events decoded, until the server ends it or it
        breaks (ApiError)."""
        try:
            self._resp = resp = self.api.open_watch(self.resource, rv)
        except Exception as e:
            raise from_exception(e) from None
        try:
            if self._stop.is_set():  # stopped while it opened, too soon to shut it down
                return
            for line in lines(resp):
                yield self.decode(line)
        except ApiError:
            raise
        except Exception as e:
            raise from_exception(e) from None
        finally:
            self._resp = None
            resp.close()  # a stream left midway must not go back to the pool as it is
            resp.release_conn()
