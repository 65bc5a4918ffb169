"""NodeFeature objects as the master keeps them: with their features in the feature
store (``Kept``), not as parsed. A fleet's objects are mostly the same groups (upstream
saw ~130 kB objects at 4,000 nodes, #1802), held once there, where parsed each would
cost several times its JSON. The service keeps each node's objects so, and so does the
NodeFeature watch's index (``nfd.master.watches.nodefeatures``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nfd.canonical import GroupCache
from nfd.features import Features
from nfd.master.core.featurestore import FeatureStore, encode
from nfd.nodefeature import NodeFeatureObject


@dataclass(frozen=True, slots=True)
class Kept:
    """One object as the master keeps it: its features by digest in a feature store."""

    namespace: str
    name: str
    node: str
    labels: Mapping[str, str]
    digest: str  # "" without features


class ObjectKeeper:
    """Objects into and out of a feature store, counted there (``release`` each kept)."""

    def __init__(self, features: FeatureStore | None = None) -> None:
        self.features = features if features is not None else FeatureStore()
        self._groups = GroupCache()

    def keep(self, obj: NodeFeatureObject) -> Kept:
        digest = ""
        if obj.features.names():
            enc = encode(obj.features.to_dict(), self._groups)
            self.features.put(enc)
            digest = enc.digest
        return Kept(obj.namespace, obj.name, obj.node, obj.labels, digest)

    def release(self, kept: Iterable[Kept]) -> None:
        for k in kept:
            if k.digest:
                self.features.release(k.digest)

    def load(self, kept: Iterable[Kept]) -> list[NodeFeatureObject]:
        return [
            NodeFeatureObject(
                k.namespace,
                k.name,
                k.node,
                self.features.get(k.digest) if k.digest else Features(),
                dict(k.labels),
            )
            for k in kept
        ]
