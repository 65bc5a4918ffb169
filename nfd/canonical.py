"""A feature set's canonical JSON, built group by group, and its digest.

The canonical JSON is upstream's shape with every key sorted and no spaces. The worker
sends its digest in heartbeats, and the master's store (``master/featurestore.py``) is
keyed by it, so both build it here.

It is assembled from each group's (``kernel.config``, ``pci.device`` ...) own canonical
JSON. A :class:`GroupCache` remembers the groups it has seen. An equal group reuses its
JSON and hash, since comparing two dicts costs far less than serialising and hashing one.
Most groups repeat: a node's features change a group at a time, and a fleet's nodes share
most of theirs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

KINDS = ("attributes", "flags", "instances")  # sorted: the canonical key order
_DUMP = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


def group_json(kind: str, elements: Any) -> str:
    """One group's canonical JSON. ``elements`` as the feature model holds them: flag
    names, an attribute map, or a list of instances' attribute maps (None: empty)."""
    if kind == "flags":
        norm: Any = {"elements": {str(e): {} for e in (elements or ())}}
    elif kind == "attributes":
        norm = {"elements": _as_dict(elements)}
    else:
        norm = {"elements": [{"attributes": _as_dict(i)} for i in (elements or ())]}
    return _DUMP(norm)


def _as_dict(m: Any) -> dict[str, Any]:
    # The json encoder takes dicts only; the model and parsed JSON give dicts already.
    return m if isinstance(m, dict) else dict(m or {})


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Encoded:
    """A feature set taken apart: its digest and its groups' (kind, name, hash, json)."""

    digest: str
    parts: tuple[tuple[str, str, str, str], ...]


class GroupCache:
    """The last ``per_name`` variants seen of each group, most recently used first."""

    def __init__(self, per_name: int = 4) -> None:
        self.per_name = per_name
        self._seen: dict[tuple[str, str], list[tuple[Any, str, str]]] = {}

    def lookup(self, kind: str, name: str, elements: Any) -> tuple[str, str]:
        """The group's canonical JSON and its hash (32 hex digits)."""
        variants = self._seen.setdefault((kind, name), [])
        for i, (known, gj, h) in enumerate(variants):
            if known is elements or known == elements:  # ``is``: a group ``held`` gave
                if i:
                    variants.insert(0, variants.pop(i))
                return gj, h
        gj = group_json(kind, elements)
        h = _hash(gj)[:32]
        variants.insert(0, (_snapshot(elements), gj, h))
        del variants[self.per_name :]
        return gj, h

    def held(self, kind: str, name: str, h: str) -> Any | None:
        """The elements of a variant of the group with hash ``h`` (as ``lookup`` took
        them; the caller must not change them), or None when none is held."""
        for known, _gj, vh in self._seen.get((kind, name), ()):
            if vh == h:
                return known
        return None


def _snapshot(elements: Any) -> Any:
    """A copy to compare later groups with: the caller may change its own in place (a
    source that keeps its containers between passes) and must not find it still equal."""
    if isinstance(elements, list):
        return [dict(i) for i in elements]
    if isinstance(elements, set | frozenset):
        return frozenset(elements)
    if isinstance(elements, dict):
        return dict(elements)
    return elements


def encode(groups: Mapping[str, Mapping[str, Any]], cache: GroupCache | None = None) -> Encoded:
    """``groups``: kind -> group name -> elements (as :func:`group_json` takes them)."""
    cache = cache if cache is not None else GroupCache(per_name=1)
    parts: list[tuple[str, str, str, str]] = []
    pieces: list[str] = []
    for kind in KINDS:
        group = groups.get(kind) or {}
        items = []
        for name in sorted(group):
            gj, h = cache.lookup(kind, name, group[name])
            parts.append((kind, name, h, gj))
            items.append(f"{_DUMP(name)}:{gj}")
        pieces.append(f'"{kind}":{{{",".join(items)}}}')
    return Encoded(_hash("{" + ",".join(pieces) + "}"), tuple(parts))


def instance_maps(elements: Iterable[Mapping[str, Any]] | None) -> list[Any]:
    """Wire-shape instances (``[{"attributes": {...}}]``) as the model holds them."""
    return [i.get("attributes") or {} for i in (elements or ())]


def instance_bodies(maps: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``instance_maps`` the other way: the model's instances in the wire shape."""
    return [{"attributes": m} for m in maps]
