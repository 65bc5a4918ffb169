"""The raw feature model, as upstream NFD has it.

Features are named ``<domain>.<feature>`` (``cpu.cpuid``, ``pci.device``) and come in
three kinds: flags (a set of names), attributes (name -> string) and instances (a list
of attribute maps). Serialised in upstream's JSON shape::

    {"flags":      {"cpu.cpuid":  {"elements": {"AVX": {}}}},
     "attributes": {"cpu.model":  {"elements": {"family": "6"}}},
     "instances":  {"pci.device": {"elements": [{"attributes": {"class": "0300"}}]}}}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nfd.canonical import Encoded, GroupCache

Labels = dict[str, str]
Instance = dict[str, str]


class FeatureFormatError(ValueError):
    """A serialised feature set does not have upstream's shape; the message names where."""


class NullFlags(set[str]):
    """A flag feature whose ``elements`` were null (or left out) rather than ``{}``:
    present, but with no element set at all. Upstream's rule engine tells the two apart
    (``matchExpressions: {}`` matches an empty set, not a null one)."""


class NullAttributes(dict[str, str]):
    """An attribute feature whose ``elements`` were null: see NullFlags."""


# Not printed (see docs/architecture.md, "Plain Python").
@dataclass(slots=True, repr=False)
class Features:
    """A node's raw features, upstream's three kinds, each keyed by ``domain.feature``:
    flags (a set of names), attributes (name -> value) and instances (a list of
    attribute sets)."""

    flags: dict[str, set[str]] = field(default_factory=dict)
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    instances: dict[str, list[Instance]] = field(default_factory=dict)

    # -- building -------------------------------------------------------------------
    def set_flags(self, name: str, names: Iterable[str]) -> None:
        self.flags[name] = set(names)

    def set_attributes(self, name: str, values: Mapping[str, str]) -> None:
        self.attributes[name] = {k: str(v) for k, v in values.items()}

    def set_instances(self, name: str, items: Iterable[Mapping[str, str]]) -> None:
        self.instances[name] = [{k: str(v) for k, v in item.items()} for item in items]

    def update(self, other: Features) -> None:
        """Take every feature of ``other``, replacing features of the same name."""
        self.flags.update(other.flags)
        self.attributes.update(other.attributes)
        self.instances.update(other.instances)

    def names(self) -> set[str]:
        return set(self.flags) | set(self.attributes) | set(self.instances)

    def domains(self) -> set[str]:
        return {n.split(".", 1)[0] for n in self.names()}

    def only(self, domains: Iterable[str]) -> Features:
        """The features of some domains (a cheap view: element containers are shared)."""
        keep = set(domains)

        def ok(n: str) -> bool:
            return n.split(".", 1)[0] in keep

        return Features(
            flags={k: v for k, v in self.flags.items() if ok(k)},
            attributes={k: v for k, v in self.attributes.items() if ok(k)},
            instances={k: v for k, v in self.instances.items() if ok(k)},
        )

    # -- serialising ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Upstream's JSON shape; keys sorted, instance order kept."""
        return {
            "flags": {k: {"elements": {e: {} for e in sorted(self.flags[k])}} for k in sorted(self.flags)},
            "attributes": {
                k: {"elements": dict(sorted(self.attributes[k].items()))} for k in sorted(self.attributes)
            },
            "instances": {
                k: {"elements": [{"attributes": dict(sorted(i.items()))} for i in self.instances[k]]}
                for k in sorted(self.instances)
            },
        }

    def to_json(self, *, indent: int | None = None) -> str:
        import json

        return json.dumps(self.to_dict(), indent=indent, sort_keys=indent is not None)

    def digest(self, cache: GroupCache | None = None) -> str:
        """A content hash: equal features give equal digests, whatever their build order.
        ``cache``: groups seen before (the worker keeps the last pass's) are not
        serialised again."""
        return self.encoded(cache).digest

    def encoded(self, cache: GroupCache | None = None) -> Encoded:
        """The digest and each group's hash and canonical JSON (``nfd.canonical``)."""
        from nfd.canonical import encode

        return encode(
            {"attributes": self.attributes, "flags": self.flags, "instances": self.instances}, cache
        )

    @classmethod
    def from_dict(cls, data: Any) -> Features:
        if not isinstance(data, Mapping):
            raise FeatureFormatError("features: expected an object")
        unknown = set(data) - {"flags", "attributes", "instances"}
        if unknown:
            raise FeatureFormatError(f"features: unknown key(s) {', '.join(sorted(map(_shown, unknown)))}")
        out = cls()
        for name, body in _groups(data, "flags"):
            flags = _elements(body, f"flags.{_shown(name)}")
            out.flags[name] = NullFlags() if flags is None else {str(e) for e in flags}
        for name, body in _groups(data, "attributes"):
            attributes = _elements(body, f"attributes.{_shown(name)}")
            if attributes is None:
                out.attributes[name] = NullAttributes()
                continue
            _strings(attributes, f"attributes.{_shown(name)}.elements")
            out.attributes[name] = dict(attributes)
        for name, body in _groups(data, "instances"):
            elems = body.get("elements") or []
            if not isinstance(elems, list):
                raise FeatureFormatError(f"instances.{_shown(name)}.elements: expected a list")
            items: list[Instance] = []
            for i, inst in enumerate(elems):
                attrs = inst.get("attributes") if isinstance(inst, Mapping) else None
                attrs = {} if attrs is None else attrs
                if not isinstance(attrs, Mapping):
                    raise FeatureFormatError(
                        f"instances.{_shown(name)}.elements[{i}].attributes: expected an object of strings"
                    )
                _strings(attrs, f"instances.{_shown(name)}.elements[{i}].attributes")
                items.append(dict(attrs))
            out.instances[name] = items
        return out

    @classmethod
    def from_json(cls, text: str | bytes) -> Features:
        import json

        try:
            data = json.loads(text)
        except ValueError as e:  # JSONDecodeError, bad UTF-8, a number Python will not convert
            raise FeatureFormatError(f"features: not JSON ({' '.join(str(e).split())})") from None
        return cls.from_dict(data)


def _groups(data: Mapping[str, Any], kind: str) -> Iterable[tuple[str, Mapping[str, Any]]]:
    from collections.abc import Mapping

    group = data.get(kind) or {}
    if not isinstance(group, Mapping):
        raise FeatureFormatError(f"{kind}: expected an object")
    for name, body in group.items():
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            raise FeatureFormatError(f"{kind}.{_shown(name)}: expected an object")
        yield str(name), body


def _shown(name: Any) -> str:
    """A name in a message: as it is, or quoted where it is no printable string (a
    message stays one line)."""
    return name if isinstance(name, str) and name.isprintable() else repr(name)


def _strings(elements: Mapping[Any, Any], where: str) -> None:
    """Names and values are strings, as JSON's keys always are (YAML's may be numbers or
    null, which the canonical encoder could not sort among strings)."""
    for k, v in elements.items():
        if not isinstance(k, str):
            raise FeatureFormatError(f"{where}: the name {k!r} is not a string")
        if not isinstance(v, str):
            raise FeatureFormatError(f"{where}.{_shown(k)}: expected a string")


def _elements(body: Mapping[str, Any], where: str) -> Mapping[str, Any] | None:
    """A group's elements object; None when it is null (upstream's "seen, nothing")."""
    from collections.abc import Mapping

    elems = body.get("elements")
    if elems is not None and not isinstance(elems, Mapping):
        raise FeatureFormatError(f"{where}.elements: expected an object")
    return elems
