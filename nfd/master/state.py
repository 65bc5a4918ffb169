"""The master's memory of nodes: each node's latest features (stored once per distinct
content, compressed), its current decision, and what the API server was last seen to
hold for the keys the master owns."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nfd.features import Features
from nfd.master.decide import Decision


def now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class Observed:
    """What the Node object holds for the keys that concern the master: its ownership
    annotations and the labels, annotations, resources and taints they name (plus the
    ones the master wants to set). Rebuilt from each GET / PATCH answer."""

    labels: dict[str, str]
    annotations: dict[str, str]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    taints: list[dict[str, str]]
    has_labels: bool = True
    has_annotations: bool = True
    has_capacity: bool = True
    has_allocatable: bool = True
    has_taints: bool = True
    resource_version: str = ""


@dataclass(slots=True)
class NodeRecord:
    name: str
    digest: str
    device_plugin_resources: frozenset[str]
    nfd_version: str
    decision: Decision
    updated: datetime
    observed: Observed | None = None  # None: read the Node before the next patch
    published: datetime | None = None  # last time the Node was seen to match
    last_error: str = ""
    generation: int = 0  # bumped on every new decision: detects races with the publisher


@dataclass(slots=True)
class _Blob:
    data: bytes
    refs: int


class FeatureStore:
    """Distinct feature sets, by digest, zlib-compressed canonical JSON with a reference
    count: a fleet of identical nodes costs one copy (upstream's master grew with #1841)."""

    def __init__(self) -> None:
        self._blobs: dict[str, _Blob] = {}

    def put(self, digest: str, canonical_json: bytes) -> None:
        entry = self._blobs.get(digest)
        if entry is None:
            self._blobs[digest] = _Blob(zlib.compress(canonical_json, 6), 1)
        else:
            entry.refs += 1

    def release(self, digest: str) -> None:
        entry = self._blobs.get(digest)
        if entry is None:
            return
        entry.refs -= 1
        if entry.refs <= 0:
            del self._blobs[digest]

    def get(self, digest: str) -> Features:
        return Features.from_json(zlib.decompress(self._blobs[digest].data))

    def __contains__(self, digest: object) -> bool:
        return digest in self._blobs

    def digests(self) -> list[str]:
        return list(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)


@dataclass
class NodeStore:
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    features: FeatureStore = field(default_factory=FeatureStore)

    def get(self, name: str) -> NodeRecord | None:
        return self.nodes.get(name)

    def __iter__(self) -> Iterator[NodeRecord]:
        return iter(list(self.nodes.values()))

    def __len__(self) -> int:
        return len(self.nodes)
