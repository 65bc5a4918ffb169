"""Node features, stored by content.

Each feature group (``kernel.config``, ``pci.device`` ...) is kept once however many
nodes have it, as canonical JSON, zlib-compressed. A node's features are a manifest of
group hashes. Nodes of one hardware kind differ in a few small groups, so a fleet costs
little more than one node (upstream's master grew with the cluster, #1841).

Groups, their hashes and the digest are ``nfd.canonical``'s, as the worker's are.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nfd import canonical
from nfd.canonical import KINDS, Encoded, GroupCache
from nfd.features import Features


def encode(raw: Mapping[str, Any], cache: GroupCache | None = None) -> Encoded:
    """From the wire shape (already validated)."""
    return canonical.encode(
        {
            kind: {name: _elements(kind, body) for name, body in (raw.get(kind) or {}).items()}
            for kind in KINDS
        },
        cache,
    )


def _elements(kind: str, body: Mapping[str, Any] | None) -> Any:
    elements = (body or {}).get("elements")
    return canonical.instance_maps(elements) if kind == "instances" else elements


_KEYS_PER_PART = 16


_Key = tuple[str, str, str]  # (kind, name, part hash)


@dataclass(slots=True)
class _Part:
    data: bytes
    refs: int
    # Each (kind, name, hash) naming it, as manifests hold them: one tuple for every node
    # with this group rather than one per node (a fleet of 10,000 nodes holds ~300,000).
    # Usually one (``first``); equal contents under several names (empty groups) have
    # more, the first few of them shared. No container for the one: a node's own group
    # (its name) would pay 48 B for a tuple, 88 B for a list.
    first: _Key | None = None
    more: tuple[_Key, ...] = ()

    def key(self, kind: str, name: str, h: str) -> _Key:
        first = self.first
        if first is not None and first[1] == name and first[0] == kind:
            return first
        for k in self.more:
            if k[1] == name and k[0] == kind:
                return k
        k = (kind, name, h)
        if first is None:
            self.first = k
        elif len(self.more) < _KEYS_PER_PART - 1:
            self.more += (k,)
        return k


@dataclass(slots=True)
class _Manifest:
    # The entries other feature sets have too, with None where this one's own are: one
    # tuple for every node of a kind (a node's own group, its name, is its alone) rather
    # than ~30 entries per node.
    shape: tuple[_Key | None, ...]
    own: tuple[_Key, ...]
    refs: int

    @property
    def parts(self) -> tuple[_Key, ...]:
        own = iter(self.own)
        return tuple(k if k is not None else next(own) for k in self.shape)


class FeatureStore:
    def __init__(self) -> None:
        self._parts: dict[str, _Part] = {}
        self._manifests: dict[str, _Manifest] = {}
        # Each shape held once, with how many manifests hold it.
        self._shapes: dict[tuple[_Key | None, ...], list[Any]] = {}

    def put(self, enc: Encoded) -> None:
        m = self._manifests.get(enc.digest)
        if m is not None:
            m.refs += 1
            return
        shape: list[_Key | None] = []
        own: list[_Key] = []
        for kind, name, h, gj in enc.parts:
            p = self._parts.get(h)
            if p is None:
                p = self._parts[h] = _Part(zlib.compress(gj.encode(), 1), 1)
            else:
                p.refs += 1
            k = p.key(kind, name, h)
            if p.refs == 1:  # new: most likely this node's alone
                own.append(k)
                shape.append(None)
            else:
                shape.append(k)
        t = tuple(shape)
        held = self._shapes.setdefault(t, [t, 0])
        held[1] += 1
        self._manifests[enc.digest] = _Manifest(held[0], tuple(own), 1)

    def release(self, digest: str) -> None:
        m = self._manifests.get(digest)
        if m is None:
            return
        m.refs -= 1
        if m.refs > 0:
            return
        del self._manifests[digest]
        held = self._shapes[m.shape]
        held[1] -= 1
        if held[1] <= 0:
            del self._shapes[m.shape]
        for _k, _n, h in m.parts:
            p = self._parts[h]
            p.refs -= 1
            if p.refs <= 0:
                del self._parts[h]

    def get(self, digest: str) -> Features:
        raw: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
        for kind, name, h in self._manifests[digest].parts:
            raw[kind][name] = json.loads(zlib.decompress(self._parts[h].data))
        return Features.from_dict(raw)

    def parts(self, digest: str) -> tuple[tuple[str, str, str], ...]:
        """(kind, name, hash) of each group of the feature set."""
        return self._manifests[digest].parts

    def group_json(self, part: str) -> bytes:
        """One group's canonical JSON (as ``parts`` names it by hash)."""
        return zlib.decompress(self._parts[part].data)

    def __contains__(self, digest: object) -> bool:
        return digest in self._manifests

    def __len__(self) -> int:
        return len(self._manifests)

    def stored_bytes(self) -> int:
        return sum(len(p.data) for p in self._parts.values())
