"""NodeFeature objects in the cluster (all namespaces), listed then watched
(``nfd.master.core.watch``), indexed by node. Each change hands the node's objects to
``on_node``. Objects are kept with their features in the feature store
(``nfd.master.core.objects``), not as parsed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from nfd.master.core.featurestore import FeatureStore
from nfd.master.core.kube import KubeApi, Resource
from nfd.master.core.objects import Kept, ObjectKeeper
from nfd.master.core.watch import ListWatch, Pages, object_key
from nfd.nodefeature import GROUP, PLURAL, VERSION, NodeFeatureError, NodeFeatureObject, parse

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)

# Objects a LIST page: a page is parsed whole, and objects of ~130 kB (#1802) make 500
# of them (the Nodes' page size) hundreds of MB of Python objects at once, which the
# process keeps as its high-water mark; 50 a page is 6.5 MB of JSON at that size.
PAGE_SIZE_MAX = 50


class NodeFeatureIndex:
    """The objects by key and by node; pure (the watcher feeds it). ``features``: where
    their features are kept (the master's own store: groups shared with its nodes')."""

    def __init__(self, features: FeatureStore | None = None) -> None:
        self.keeper = ObjectKeeper(features)
        self.objects: dict[Key, Kept] = {}
        self.by_node: dict[str, set[Key]] = {}

    def of_node(self, node: str) -> list[NodeFeatureObject]:
        return self.keeper.load(self.objects[k] for k in sorted(self.by_node.get(node, ())))

    def put(self, obj: NodeFeatureObject) -> set[str]:
        """Nodes whose objects changed."""
        return self._put(self.keeper.keep(obj))

    def _put(self, kept: Kept) -> set[str]:
        key = (kept.namespace, kept.name)
        if self.objects.get(key) == kept:
            self.keeper.release([kept])
            return set()
        touched = self.remove(key)
        self.objects[key] = kept
        if kept.node:
            self.by_node.setdefault(kept.node, set()).add(key)
            touched.add(kept.node)
        return touched

    def remove(self, key: Key) -> set[str]:
        before = self.objects.pop(key, None)
        if before is None:
            return set()
        self.keeper.release([before])
        if not before.node:
            return set()
        keys = self.by_node.get(before.node)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_node[before.node]
        return {before.node}

    def replace_all(self, kept: Iterable[Kept]) -> set[str]:
        """``kept``: every object now, each kept by this index's ``keeper``."""
        new = {(k.namespace, k.name): k for k in kept}
        touched: set[str] = set()
        for key in [k for k in self.objects if k not in new]:
            touched |= self.remove(key)
        for k in new.values():
            touched |= self._put(k)
        return touched


class NodeFeatureWatcher:
    def __init__(
        self,
        *,
        api: KubeApi,
        page_size: int,
        on_node: Callable[[str, list[NodeFeatureObject]], object],
        on_synced: Callable[[], None] | None = None,
        features: FeatureStore | None = None,
    ) -> None:
        self.on_node = on_node
        self.index = NodeFeatureIndex(features)
        self.watch = ListWatch(
            api=api,
            resource=Resource(PLURAL, GROUP, VERSION),
            page_size=min(page_size, PAGE_SIZE_MAX),
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
        # Each object kept as its page comes: a LIST of big objects is never all parsed.
        kept: dict[Key, Kept] = {}
        try:
            async for page in pages:
                for o in map(self._parse, page):
                    if o is not None:
                        self.index.keeper.release(filter(None, [kept.get((o.namespace, o.name))]))
                        kept[(o.namespace, o.name)] = self.index.keeper.keep(o)
        except BaseException:
            self.index.keeper.release(kept.values())  # a LIST that broke off keeps nothing
            raise
        for node in sorted(self.index.replace_all(kept.values())):
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
