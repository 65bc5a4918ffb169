"""Node features, stored by content.

Each feature group (``kernel.config``, ``pci.device`` ...) is kept once however many
nodes have it, as canonical JSON, zlib-compressed. A node's features are a manifest of
group hashes. Nodes of one hardware kind differ in a few small groups, so a fleet costs
little more than one node (upstream's master grew with the cluster, #1841).

The canonical JSON of a whole feature set is assembled from the groups' canonical JSON,
so a node's digest equals the worker's ``Features.digest()`` without building it twice.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nfd.features import Features

KINDS = ("attributes", "flags", "instances")  # sorted: the canonical key order
_DUMP = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def _group_json(kind: str, body: Mapping[str, Any]) -> str:
    elems = body.get("elements")
    if kind == "flags":
        norm: Any = {"elements": {str(e): {} for e in (elems or {})}}
    elif kind == "attributes":
        norm = {"elements": dict(elems or {})}
    else:
        norm = {"elements": [{"attributes": dict(i.get("attributes") or {})} for i in (elems or [])]}
    return _DUMP(norm)


@dataclass(frozen=True, slots=True)
class Encoded:
    """A feature set taken apart: its digest and its groups' (kind, name, hash, json)."""

    digest: str
    parts: tuple[tuple[str, str, str, str], ...]


class GroupCache:
    """Recently seen groups, by name: a group equal to one seen before (most of a fleet's
    are) reuses its canonical JSON and hash; comparing two dicts costs far less than
    serialising and hashing one."""

    def __init__(self, per_name: int = 4) -> None:
        self.per_name = per_name
        self._seen: dict[tuple[str, str], list[tuple[Any, str, str]]] = {}

    def lookup(self, kind: str, name: str, body: Any) -> tuple[str, str]:
        variants = self._seen.setdefault((kind, name), [])
        for i, (known, gj, h) in enumerate(variants):
            if known == body:
                if i:  # most recently used first
                    variants.insert(0, variants.pop(i))
                return gj, h
        gj = _group_json(kind, body or {})
        h = hashlib.sha256(gj.encode()).hexdigest()[:32]
        variants.insert(0, (body, gj, h))
        del variants[self.per_name :]
        return gj, h


def encode(raw: Mapping[str, Any], cache: GroupCache | None = None) -> Encoded:
    """From the wire shape (already validated): group by group canonical JSON, their
    hashes, and the digest of the whole (equal to ``Features.digest()``)."""
    parts: list[tuple[str, str, str, str]] = []
    pieces: list[str] = []
    for kind in KINDS:
        group = raw.get(kind) or {}
        items = []
        for name in sorted(group):
            if cache is not None:
                gj, h = cache.lookup(kind, name, group[name])
            else:
                gj = _group_json(kind, group[name] or {})
                h = hashlib.sha256(gj.encode()).hexdigest()[:32]
            parts.append((kind, name, h, gj))
            items.append(f"{_DUMP(name)}:{gj}")
        pieces.append(f'"{kind}":{{{",".join(items)}}}')
    whole = "{" + ",".join(pieces) + "}"
    return Encoded(hashlib.sha256(whole.encode()).hexdigest(), tuple(parts))


@dataclass(slots=True)
class _Part:
    data: bytes
    refs: int


@dataclass(slots=True)
class _Manifest:
    parts: tuple[tuple[str, str, str], ...]  # (kind, name, part hash)
    refs: int


class FeatureStore:
    def __init__(self) -> None:
        self._parts: dict[str, _Part] = {}
        self._manifests: dict[str, _Manifest] = {}

    def put(self, enc: Encoded) -> None:
        m = self._manifests.get(enc.digest)
        if m is not None:
            m.refs += 1
            return
        for _kind, _name, h, gj in enc.parts:
            p = self._parts.get(h)
            if p is None:
                self._parts[h] = _Part(zlib.compress(gj.encode(), 1), 1)
            else:
                p.refs += 1
        self._manifests[enc.digest] = _Manifest(tuple((k, n, h) for k, n, h, _ in enc.parts), 1)

    def release(self, digest: str) -> None:
        m = self._manifests.get(digest)
        if m is None:
            return
        m.refs -= 1
        if m.refs > 0:
            return
        del self._manifests[digest]
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

    def __contains__(self, digest: object) -> bool:
        return digest in self._manifests

    def __len__(self) -> int:
        return len(self._manifests)

    def stored_bytes(self) -> int:
        return sum(len(p.data) for p in self._parts.values())
