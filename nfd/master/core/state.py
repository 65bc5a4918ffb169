"""The master's memory of nodes: each node's latest features (by content, see
featurestore), its current decision, and what the API server was last seen to hold for
the keys the master owns."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from nfd.decision import Decision
from nfd.master.core.featurestore import FeatureStore


def now() -> float:
    """Wall-clock time, seconds since the epoch: each record holds two instants, and a
    float is half a datetime's 48 B (``api.views`` writes them out as ISO 8601)."""
    return time.time()


SHARED_MAX_LEN = 64 * 1024
_NO_OBJECTS: Mapping[str, str] = MappingProxyType({})  # most nodes': one object


def shared(value: str) -> str:
    """The first equal string seen lately, for values each node holds a copy of while a
    fleet has few distinct ones (tracking annotations, versions): parsed from every
    request or answer, each would be its own object. Bounded: 256 values, each short
    enough; a miss only costs the copy."""
    return _shared(value) if len(value) <= SHARED_MAX_LEN else value


@functools.lru_cache(maxsize=256)
def _shared(value: str) -> str:
    return value


@dataclass(slots=True)
class Observed:
    """What the Node object holds for the keys that concern the master: its ownership
    annotations and the labels, annotations, resources and taints they name (plus the
    ones the master wants to set). Rebuilt from each GET / PATCH answer, never changed:
    nodes share equal parts (``patches.observe``)."""

    labels: dict[str, str]
    annotations: dict[str, str]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    taints: list[dict[str, str]]
    # Which of these the Node has at all (``HAS_*`` bits): one int rather than five
    # fields, 32 B a node.
    present: int = 0b11111
    resource_version: int | str = ""  # an int when it is one (``patches.observe``)

    def has(self, part: int) -> bool:
        """Whether the Node has ``part`` (a ``HAS_*`` bit) at all."""
        return bool(self.present & part)


HAS_LABELS, HAS_ANNOTATIONS, HAS_CAPACITY, HAS_ALLOCATABLE, HAS_TAINTS = 1, 2, 4, 8, 16


@dataclass(slots=True)
class NodeRecord:
    name: str
    digest: str
    device_plugin_resources: frozenset[str]
    nfd_version: str
    decision: Decision
    updated: float  # wall-clock (``now``), as published below
    observed: Observed | None = None  # None: read the Node before the next patch
    published: float | None = None  # last time the Node was seen to match
    last_error: str = ""
    generation: int = 0  # bumped on every new decision
    body_hash: bytes = b""  # of the last features request: an identical one is answered at once
    last_seen: float = 0.0  # monotonic time of the worker's last request
    # The worker's own features, when NodeFeature objects add to them (``digest`` is
    # then the merged set); "" when ``digest`` is the worker's.
    worker_digest: str = ""
    has_worker: bool = True  # False: known only from NodeFeature objects
    # Label -> "NodeFeature <namespace>/<name>" that asked for it (replaced, not changed).
    label_objects: Mapping[str, str] = field(default_factory=lambda: _NO_OBJECTS)

    @property
    def own_digest(self) -> str:
        return self.worker_digest or self.digest

    node_missing: bool = False  # the API server has no such Node (the last write got 404)


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
