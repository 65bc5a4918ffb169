"""NodeFeature objects in the cluster (all namespaces): listed page by page at start, then
watched from that list's resourceVersion in a background thread. A broken watch resumes
from the last resourceVersion seen; only an expired one (410 Gone) lists again, so a
change never costs a LIST. Each change hands the node's objects to ``on_node``."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from nfd.master.kube import KubeApi, KubeError
from nfd.nodefeature import GROUP, PLURAL, VERSION, NodeFeatureError, NodeFeatureObject, parse

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)


class NodeFeatureIndex:
    """The objects by key and by node; pure (the watcher feeds it)."""

    def __init__(self) -> None:
        self.objects: dict[Key, NodeFeatureObject] = {}
        self.by_node: dict[str, set[Key]] = {}

    def of_node(self, node: str) -> list[NodeFeatureObject]:
        return [self.objects[k] for k in sorted(self.by_node.get(node, ()))]

    def put(self, obj: NodeFeatureObject) -> set[str]:
        """Nodes whose objects changed."""
        key = (obj.namespace, obj.name)
        before = self.objects.get(key)
        if before == obj:
            return set()
        touched = self.remove(key)
        self.objects[key] = obj
        if obj.node:
            self.by_node.setdefault(obj.node, set()).add(key)
            touched.add(obj.node)
        return touched

    def remove(self, key: Key) -> set[str]:
        before = self.objects.pop(key, None)
        if before is None or not before.node:
            return set()
        keys = self.by_node.get(before.node)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_node[before.node]
        return {before.node}

    def replace_all(self, objs: list[NodeFeatureObject]) -> set[str]:
        new = {(o.namespace, o.name): o for o in objs}
        touched: set[str] = set()
        for key in [k for k in self.objects if k not in new]:
            touched |= self.remove(key)
        for o in new.values():
            touched |= self.put(o)
        return touched


def _key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class NodeFeatureWatcher:
    def __init__(
        self,
        *,
        api: KubeApi,
        page_size: int,
        on_node: Callable[[str, list[NodeFeatureObject]], object],
        on_synced: Callable[[], None] | None = None,
    ) -> None:
        self.api = api
        self.page_size = page_size
        self.on_node = on_node
        self.on_synced = on_synced
        self.index = NodeFeatureIndex()
        self.synced = False
        self.lists = 0  # LIST requests made (each page counts)
        self._resource_version = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            await self.relist()
        except KubeError as e:
            log.warning("cannot list NodeFeature objects yet (%s); retrying in the background", e)
        self._thread = threading.Thread(target=self._watch_forever, name="nodefeature-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _parse(self, raw: Any) -> NodeFeatureObject | None:
        try:
            return parse(raw)
        except NodeFeatureError as e:
            ns, name = _key(raw) if isinstance(raw, dict) else ("", "?")
            log.warning("NodeFeature %s/%s ignored: %s", ns, name, e)
            return None

    async def relist(self) -> None:
        items: list[NodeFeatureObject] = []
        cont: str | None = None
        rv = ""
        while True:
            try:
                page = await self.api.list_custom_all(GROUP, VERSION, PLURAL, limit=self.page_size, cont=cont)
            except KubeError as e:
                if e.status == 404:  # the CRD is not installed: there are none
                    page = {"items": [], "metadata": {}}
                else:
                    raise
            self.lists += 1
            for raw in page.get("items") or []:
                obj = self._parse(raw)
                if obj is not None:
                    items.append(obj)
            meta = page.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or rv)
            cont = meta.get("continue") or None
            if not cont:
                break
        self._resource_version = rv
        for node in sorted(self.index.replace_all(items)):
            self.on_node(node, self.index.of_node(node))
        if not self.synced:
            self.synced = True
            if self.on_synced is not None:
                self.on_synced()

    def apply_event(self, kind: str, raw: dict[str, Any]) -> None:
        if kind == "DELETED":
            touched = self.index.remove(_key(raw))
        elif kind in ("ADDED", "MODIFIED"):
            obj = self._parse(raw)
            touched = self.index.remove(_key(raw)) if obj is None else self.index.put(obj)
        else:
            return
        for node in sorted(touched):
            self.on_node(node, self.index.of_node(node))

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
                        GROUP,
                        VERSION,
                        PLURAL,
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
                        if kind != "BOOKMARK":
                            self._loop.call_soon_threadsafe(self.apply_event, kind, obj)
                        delay = 1.0
                    continue  # the server ended the watch: resume from where it was
                except ApiException as e:
                    expired = e.status == 410
                    log.info("NodeFeature watch interrupted: %s", e.reason)
                except Exception as e:  # a broken connection: resume, no LIST
                    log.info("NodeFeature watch interrupted: %s", e)
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, 30.0)
            if expired:
                fut = asyncio.run_coroutine_threadsafe(self.relist(), self._loop)
                try:
                    fut.result(timeout=120)
                except Exception as e:
                    log.info("NodeFeature relist failed: %s", e)
