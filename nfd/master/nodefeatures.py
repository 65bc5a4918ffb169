"""NodeFeature objects in the cluster (all namespaces), listed then watched
(``nfd.master.watch``), indexed by node. Each change hands the node's objects to
``on_node``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from nfd.master.kube import KubeApi, Resource
from nfd.master.watch import ListWatch, Pages, object_key
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


class NodeFeatureWatcher:
    def __init__(
        self,
        *,
        api: KubeApi,
        page_size: int,
        on_node: Callable[[str, list[NodeFeatureObject]], object],
        on_synced: Callable[[], None] | None = None,
    ) -> None:
        self.on_node = on_node
        self.index = NodeFeatureIndex()
        self.watch = ListWatch(
            api=api,
            resource=Resource(PLURAL, GROUP, VERSION),
            page_size=page_size,
            on_list=self._listed,
            on_event=self.apply_event,
            on_synced=on_synced,
            absent=(403, 404),
        )

    @property
    def synced(self) -> bool:
        return self.watch.synced

    async def start(self) -> None:
        await self.watch.start()

    def stop(self) -> None:
        self.watch.stop()

    def _parse(self, raw: dict[str, Any]) -> NodeFeatureObject | None:
        try:
            return parse(raw)
        except NodeFeatureError as e:
            ns, name = object_key(raw)
            log.warning("NodeFeature %s/%s ignored: %s", ns, name, e)
            return None

    async def _listed(self, pages: Pages) -> None:
        items = [o async for page in pages for o in map(self._parse, page) if o is not None]
        for node in sorted(self.index.replace_all(items)):
            self.on_node(node, self.index.of_node(node))

    def apply_event(self, kind: str, raw: dict[str, Any]) -> None:
        if kind == "DELETED":
            touched = self.index.remove(object_key(raw))
        elif kind in ("ADDED", "MODIFIED"):
            obj = self._parse(raw)
            touched = self.index.remove(object_key(raw)) if obj is None else self.index.put(obj)
        else:
            return
        for node in sorted(touched):
            self.on_node(node, self.index.of_node(node))
