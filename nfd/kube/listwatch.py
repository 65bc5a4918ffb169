"""The one list-then-watch loop: a LIST (its pages read by the owner), then a watch from
its resourceVersion with bookmarks, resumed from the last resourceVersion seen when the
server ends it. A 410 Gone (the resourceVersion expired) lists again after the backoff;
so does a broken stream when the owner asks for it (``relist_after_break``: an owner
whose view must have no gap since a LIST), else the watch resumes after the backoff.
What the objects mean is the owner's: ``relist`` hands a LIST's objects over and
answers its resourceVersion, ``on_event`` takes each change."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from nfd.backoff import Backoff
from nfd.kube.errors import ApiError, Gone, watch_error
from nfd.kube.transport import Transport, with_query

log = logging.getLogger("nfd.kube")

WATCH_TIMEOUT_S = 300  # the server ends a watch after this; it resumes at once


def pages(api: Transport, path: str, *, limit: int, timeout: float | None = None) -> Iterator[dict[str, Any]]:
    """Every page of a paginated LIST of ``path``, in order."""
    cont = ""
    while True:
        page = api.request("GET", with_query(path, {"limit": str(limit), "continue": cont}), timeout=timeout)
        yield page
        cont = str((page.get("metadata") or {}).get("continue") or "")
        if not cont:
            return


def watch_path(path: str, resource_version: str, timeout_s: int = WATCH_TIMEOUT_S) -> str:
    """The watch request of a collection's ``path`` from ``resource_version``, with
    bookmarks, ended by the server after ``timeout_s``."""
    query = {"watch": "true", "resourceVersion": resource_version, "allowWatchBookmarks": "true"}
    return with_query(path, {**query, "timeoutSeconds": str(timeout_s)})


class WatchLoop:
    """Runs on the caller's thread (``run``) until ``stop``. ``relist``: one LIST, its
    objects handed to the owner; the resourceVersion to watch from; raises ApiError.
    ``open_watch(rv)``: the watch's events (``Transport.watch`` of :func:`watch_path`).
    ``on_broken``: the watch broke or expired (the owner's view may have a gap)."""

    def __init__(
        self,
        *,
        name: str,
        relist: Callable[[], str],
        open_watch: Callable[[str], Iterable[dict[str, Any]]],
        on_event: Callable[[str, dict[str, Any]], object],
        backoff: Backoff,
        stop: threading.Event,
        relist_after_break: bool = False,
        on_broken: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.relist = relist
        self.open_watch = open_watch
        self.on_event = on_event
        self.backoff = backoff
        self.stop = stop
        self.relist_after_break = relist_after_break
        self.on_broken = on_broken
        self.resource_version = ""

    def run(self, resource_version: str = "") -> None:
        """From ``resource_version`` (a LIST's, made by the owner), else listing first."""
        self.resource_version = resource_version
        expired = not resource_version
        while not self.stop.is_set():
            if expired:
                try:
                    self.resource_version = self.relist()
                    expired = False
                except Exception as e:  # an ApiError, or the owner's own failure
                    log.info("%s list failed: %s", self.name, e)
            if not expired:
                began = time.monotonic()
                try:
                    if self._watch():
                        self.backoff.reset()
                    # The server ended the watch (its timeout): resume at once, unless it
                    # ended as soon as it began (a server that ends each one is not hammered).
                    if time.monotonic() - began > 1.0:
                        continue
                except ApiError as e:
                    if self.stop.is_set():
                        return
                    log.info("%s watch interrupted: %s", self.name, e)
                    if self.on_broken is not None:
                        self.on_broken()
                    expired = isinstance(e, Gone) or self.relist_after_break
            if self.stop.wait(self.backoff.next_delay()):
                return

    def _watch(self) -> bool:
        """One watch, until the server ends it or it breaks (raises ApiError); whether
        any event came."""
        got = False
        for ev in self.open_watch(self.resource_version):
            if self.stop.is_set():
                break
            kind, obj = str(ev.get("type")), ev.get("object")
            if not isinstance(obj, dict):
                continue
            if kind == "ERROR":  # 410 Gone (expired) and the like
                raise watch_error(obj)
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self.resource_version = str(rv)
            if kind != "BOOKMARK":
                self.on_event(kind, obj)
            got = True
        return got
