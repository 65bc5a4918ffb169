"""The Node watch: a blocking watch in its own thread, each event handed to the event
loop. When the watch breaks (timeout, 410 Gone, the API server away) it waits, backing
off, lists again through ``relist`` (which answers the resourceVersion to resume from)
and watches again."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from nfd.master.kube import KubeApi

log = logging.getLogger(__name__)


class NodeWatch:
    def __init__(
        self,
        *,
        api: KubeApi,
        on_event: Callable[[str, dict[str, Any]], None],
        relist: Callable[[], Coroutine[Any, Any, str]],
    ) -> None:
        self.api = api
        self.on_event = on_event
        self.relist = relist
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rv = ""

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self, resource_version: str) -> None:
        """Watch from ``resource_version`` (a LIST's) on."""
        self._loop = asyncio.get_running_loop()
        self._rv = resource_version
        self._thread = threading.Thread(target=self._watch_forever, name="node-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch_forever(self) -> None:
        from kubernetes import watch

        assert self._loop is not None
        delay = 1.0
        while not self._stop.is_set():
            w = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                for ev in w.stream(  # type: ignore[no-untyped-call]
                    self.api.core.list_node,
                    resource_version=self._rv or None,
                    allow_watch_bookmarks=True,
                    timeout_seconds=300,
                    deserialize=False,  # plain dicts: the master keeps a few keys of each
                ):
                    if self._stop.is_set():
                        w.stop()  # type: ignore[no-untyped-call]
                        return
                    kind, obj = str(ev.get("type")), ev.get("object") or {}
                    if kind == "ERROR":  # 410 Gone and the like: list again
                        raise RuntimeError(str(obj.get("message") or obj))
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self._rv = str(rv)
                    if kind != "BOOKMARK":
                        self._loop.call_soon_threadsafe(self.on_event, kind, obj)
                    delay = 1.0
                continue  # the server ended the watch (timeout): resume from _rv
            except Exception as e:  # the watch breaks for many reasons; always recover
                log.info("Node watch interrupted: %s", e)
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, 30.0)
            try:
                fut = asyncio.run_coroutine_threadsafe(self.relist(), self._loop)
                self._rv = fut.result(timeout=120)
            except Exception as e:
                log.info("Node relist failed: %s", e)
