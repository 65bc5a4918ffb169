"""List-then-watch of one custom resource across all namespaces, in a background thread:
one paginated LIST at start, then a watch from its resourceVersion. A broken watch
resumes from the last resourceVersion seen; only an expired one (410 Gone) lists again,
so a change never costs a LIST. What the objects mean is the caller's (callbacks run on
the event loop)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from nfd.master.kube import KubeApi, KubeError

log = logging.getLogger(__name__)


class ResourceWatcher:
    def __init__(
        self,
        *,
        api: KubeApi,
        group: str,
        version: str,
        plural: str,
        page_size: int,
        on_list: Callable[[list[dict[str, Any]]], None],
        on_event: Callable[[str, dict[str, Any]], None],
        on_synced: Callable[[], None] | None = None,
    ) -> None:
        self.api = api
        self.group, self.version, self.plural = group, version, plural
        self.page_size = page_size
        self.on_list = on_list
        self.on_event = on_event
        self.on_synced = on_synced
        self.synced = False
        self._resource_version = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            await self.relist()
        except KubeError as e:
            log.warning("cannot list %s yet (%s); retrying in the background", self.plural, e)
        self._thread = threading.Thread(target=self._watch_forever, name=f"{self.plural}-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    async def relist(self) -> None:
        items: list[dict[str, Any]] = []
        cont: str | None = None
        rv = ""
        while True:
            try:
                page = await self.api.list_custom_all(
                    self.group, self.version, self.plural, limit=self.page_size, cont=cont
                )
            except KubeError as e:
                # 404: the CRD is not installed, there are none. 403: no rights to read
                # them (RBAC from before they were read): the rest of the master works
                # on, without them, and the watch keeps trying.
                if e.status == 404:
                    page = {"items": [], "metadata": {}}
                elif e.status == 403:
                    log.error("not allowed to list %s (%s): going on without them", self.plural, e)
                    page = {"items": [], "metadata": {}}
                else:
                    raise
            items.extend(o for o in page.get("items") or [] if isinstance(o, dict))
            meta = page.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or rv)
            cont = meta.get("continue") or None
            if not cont:
                break
        self._resource_version = rv
        self.on_list(items)
        if not self.synced:
            self.synced = True
            if self.on_synced is not None:
                self.on_synced()

    def _watch_forever(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        assert self._loop is not None
        delay = 1.0
        while not self._stop.is_set():
            expired = not self.synced
            if not expired:
                w = watch.Watch()  # type: ignore[no-untyped-call]
                try:
                    for ev in w.stream(  # type: ignore[no-untyped-call]
                        self.api.custom.list_cluster_custom_object,
                        self.group,
                        self.version,
                        self.plural,
                        resource_version=self._resource_version or None,
                        allow_watch_bookmarks=True,
                        timeout_seconds=300,
                    ):
                        if self._stop.is_set():
                            w.stop()  # type: ignore[no-untyped-call]
                            return
                        obj = ev.get("object") or {}
                        rv = (obj.get("metadata") or {}).get("resourceVersion")
                        if rv:
                            self._resource_version = str(rv)
                        kind = str(ev.get("type"))
                        if kind != "BOOKMARK" and isinstance(obj, dict):
                            self._loop.call_soon_threadsafe(self.on_event, kind, obj)
                        delay = 1.0
                    continue  # the server ended the watch: resume from where it was
                except ApiException as e:
                    expired = e.status == 410
                    log.info("%s watch interrupted: %s", self.plural, e.reason)
                except Exception as e:  # a broken connection: resume, no LIST
                    log.info("%s watch interrupted: %s", self.plural, e)
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, 30.0)
            if expired:
                fut = asyncio.run_coroutine_threadsafe(self.relist(), self._loop)
                try:
                    fut.result(timeout=120)
                except Exception as e:
                    log.info("%s relist failed: %s", self.plural, e)
