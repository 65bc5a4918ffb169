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


@dataclass(slots=True)
class _Part:
    data: bytes
    refs: int
    # Each (kind, name, hash) naming it, as manifests hold them: one tuple for every node
    # with this group rather than one per node (a fleet of 10,000 nodes holds ~300,000).
    # Usually one; equal contents under several names (empty groups) have several, the
    # first few of them shared.
    keys: list[tuple[str, str, str]]

    def key(self, kind: str, name: str, h: str) -> tuple[str, str, str]:
        for k in self.keys:
            if k[1] == name and k[0] == kind:
                return k
        k = (kind, name, h)
        if len(self.keys) < _KEYS_PER_PART:
            self.keys.append(k)
        return k


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
        keys: list[tuple[str, str, str]] = []
        for kind, name, h, gj in enc.parts:
            p = self._parts.get(h)
            if p is None:
                p = self._parts[h] = _Part(zlib.compress(gj.encode(), 1), 1, [])
            else:
                p.refs += 1
            keys.append(p.key(kind, name, h))
        self._manifests[enc.digest] = _Manifest(tuple(keys), 1)

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

    def group_json(self, part: str) -> bytes:
        """One group's canonical JSON (as ``parts`` names it by hash)."""
        return zlib.decompress(self._parts[part].data)

    def __contains__(self, digest: object) -> bool:
        return digest in self._manifests

    def __len__(self) -> int:
        return len(self._manifests)

    def stored_bytes(self) -> int:
        return sum(len(p.data) for p in self._parts.values())
