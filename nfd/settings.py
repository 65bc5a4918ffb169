"""The one settings mechanism of nfd's binaries: the worker's config, the master's config
file and environment, the device config, the topology updater's config. A model is a set of value classes
(dataclasses) whose fields are the keys;
this module reads it from a YAML file (through :mod:`nfd.yamlfile`) or from the environment, and every value
that cannot be used is one :class:`ConfigError` naming the file (or variable) and the
key path::

    config file /etc/nfd/nfd-worker.conf: core.sleepInterval: 'soon' is not a duration ...

Keys are the fields' names in camelCase (upstream's spelling); ``field(metadata=...)``
says more about one:

- ``key``: the key when it is not the camelCase of the name (``labelWhiteList``);
- ``raw``: a list (or any value) taken as it is, for a model of its own downstream;
- ``gt``, ``ge``, ``le``: the least number allowed (exclusive, inclusive), the most;
- ``type``: the type of a field whose default is None (``pathlib.Path``);
- ``parse``: ``parse(value, where)`` makes the field's value (a shorthand, a union, a
  list of models), raising ConfigError naming ``where`` or a key below it;
- ``internal``: not a key (set by the code that builds the model).

A field without a default is required. A model whose class says
``__unknown_keys__ = "error"`` refuses keys it does not know.

Otherwise each value is converted to what the field's default is: a string, true/false,
a whole number, a number of seconds (a Go duration such as ``90s`` in a file), a list of
strings, a nested group. Checks that involve the value itself (a regular expression that
compiles, one of a few words) go in ``__post_init__`` and raise ConfigError with the
key relative to the group (``migStrategy: ...``); the loader puts the group's path in
front. Keys the model does not know are warnings (upstream's files carry keys such as
``klog`` that mean nothing here).

"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    T = TypeVar("T")


class ConfigError(ValueError):
    """A setting that cannot be used. The message is one line; the loaders below make it
    start with where the value came from (file, variable) and the key path."""

    def __init__(self, why: str, key: str = "") -> None:
        super().__init__(f"{key}: {why}" if key else why)
        self.why = why
        self.key = key  # the key path at fault, "" when the message names it already


# -- reading ----------------------------------------------------------------------------


def load_file(path: str | os.PathLike[str], build: Callable[[Any, list[str]], T]) -> tuple[T, list[str]]:
    """A config file's YAML document, turned into settings by ``build(data, warnings)``
    (:func:`from_mapping`, or a model's own validation that raises ConfigError naming the
    key). Raises ConfigError, one line that names the file once, for a file that cannot
    be read (missing, binary, too large), bad YAML or a bad value. Warnings (unknown
    keys) come back naming the file too."""
    import os

    from nfd.yamlfile import YamlFileError, load  # only when a file is given

    p = os.fspath(path)
    try:
        data = load(p)
    except YamlFileError as e:
        raise ConfigError(f"config file {e}") from None
    warnings: list[str] = []
    try:
        built = build(data, warnings)
    except ConfigError as e:
        raise ConfigError(f"config file {p}: {e}") from None
    return built, [f"config file {p}: {w}" for w in warnings]


def load_model(path: str | os.PathLike[str], cls: type[T]) -> tuple[T, list[str]]:
    """A config file read into the model ``cls``; see :func:`load_file`."""
    return load_file(path, lambda data, warnings: from_mapping(cls, data, warnings=warnings))


def from_mapping(cls: type[T], data: Any, *, warnings: list[str], where: str = "") -> T:
    """Build a model from upstream-style camelCase keys (see the module's docstring).
    ``where`` is the key path of ``data`` in its file, for messages."""
    from collections.abc import Mapping  # only when a config file is loaded

    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a mapping, got {type(data).__name__}", where or "the file")
    defaults = _defaults(cls)
    fields = model_fields(cls)
    known = {meta.get("key", _camel(name)): name for name, meta in fields.items() if not meta.get("internal")}
    strict = getattr(cls, "__unknown_keys__", "warn") == "error"
    for key_, field_ in known.items():
        if field_ not in defaults and key_ not in data:
            raise ConfigError("required", f"{where}.{key_}" if where else key_)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        name = known.get(key) if isinstance(key, str) else None
        if name is None and strict:
            if not isinstance(key, str):  # YAML's 1: or null: where a name belongs
                raise ConfigError(f"the key {key!r} is not a string", where)
            raise ConfigError("unknown key", f"{where}.{key_name(key)}" if where else key_name(key))
        if name is None:
            warnings.append(
                f"{where}: unknown key {key!r} ignored" if where else f"unknown key {key!r} ignored"
            )
            continue
        path = f"{where}.{key}" if where else str(key)
        kwargs[name] = convert(cls, name, defaults.get(name), value, warnings, path)
    return _build(cls, kwargs, where)


def _defaults(cls: type[Any]) -> dict[str, Any]:
    """Each field's default (made by its factory), required ones left out."""
    import dataclasses

    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def from_environment(cls: type[T], prefix: str, environ: Mapping[str, str]) -> T:
    """A model of groups from ``<PREFIX><GROUP>__<FIELD>`` variables (field names in
    upper case: ``NFD_MASTER_KUBE__QPS``); a list is JSON (``["a.example.com"]``), a
    switch true/false (1/0, yes/no, on/off). A group whose field says
    ``metadata={"env": False}`` is not read from here. Raises ConfigError naming every
    variable at fault, on one line."""
    defaults = cls()
    groups: dict[str, Any] = {}
    errors: list[str] = []
    fields = model_fields(cls)
    for var in sorted(environ):
        if not var.startswith(prefix):
            continue
        group, sep, key = var[len(prefix) :].lower().partition("__")
        if group not in fields or fields[group].get("env") is False:
            continue  # not ours (NFD_MASTER_URL is the worker's), or not from here
        if not sep:
            errors.append(f"{var}: set each key on its own ({var}__<KEY>)")
            continue
        group_type = type(getattr(defaults, group))
        if key not in model_fields(group_type):
            errors.append(f"{var}: unknown setting")
            continue
        try:
            value = _from_text(getattr(getattr(defaults, group), key), environ[var])
            groups.setdefault(group, {})[key] = convert(
                group_type, key, getattr(getattr(defaults, group), key), value, [], var
            )
        except ConfigError as e:
            errors.append(str(e))
    for group, kwargs in groups.items():
        try:
            groups[group] = _build(type(getattr(defaults, group)), kwargs, "")
        except ConfigError as e:  # from __post_init__: its key is the group's
            errors.append(f"{prefix}{group.upper()}: {e}")
    if errors:
        raise ConfigError("; ".join(errors), "environment")
    return cls(**groups)


def model_fields(cls: type[Any]) -> dict[str, Mapping[str, Any]]:
    """A model's fields in order, each with its metadata."""
    import dataclasses

    return {f.name: f.metadata for f in dataclasses.fields(cls)}


def key_name(key: object) -> str:
    """A key in a key path: as it is when a plain name, quoted otherwise (an empty key,
    blanks, a dot that would read as a path, a newline that would break the line)."""
    text = str(key)
    plain = text != "" and all(c.isalnum() or c in "_-/" for c in text)
    return text if plain or not isinstance(key, str) else repr(key)


def _is_model(value: object) -> bool:
    import dataclasses

    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _build(cls: type[T], kwargs: dict[str, Any], where: str) -> T:
    try:
        return cls(**kwargs)
    except ConfigError as e:  # from __post_init__: the key relative to the group
        key = ".".join(k for k in (where, e.key) if k)
        raise ConfigError(e.why, key) from None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


# -- values -----------------------------------------------------------------------------


def convert(cls: type[Any], name: str, default: Any, value: Any, warnings: list[str], where: str) -> Any:
    """The value of field ``name`` of ``cls`` (whose default is ``default``)."""
    meta = model_fields(cls)[name]
    if "parse" in meta:
        parsed = meta["parse"](value, where)
        _bounds(meta, parsed, where)
        return parsed
    if meta.get("raw"):
        if isinstance(default, tuple):
            if value is None:
                return ()
            if not isinstance(value, list):
                raise ConfigError("expected a list", where)
            return tuple(value)
        return value
    if default is None:
        if value is None:
            return None
        kind = meta.get("type", str)
        return kind(_convert("", value, warnings, where))
    # The bound first: a number below it is that, not a bad duration.
    if isinstance(value, int | float) and not isinstance(value, bool):
        _bounds(meta, value, where)
        return _convert(default, value, warnings, where)
    out = _convert(default, value, warnings, where)
    _bounds(meta, out, where)
    return out


def _bounds(meta: Mapping[str, Any], value: Any, where: str) -> None:
    if "gt" in meta and not value > meta["gt"]:
        raise ConfigError(f"{_shown(value)}: must be more than {meta['gt']:g}", where)
    if "ge" in meta and not value >= meta["ge"]:
        raise ConfigError(f"{_shown(value)}: must be at least {meta['ge']:g}", where)
    if "le" in meta and not value <= meta["le"]:
        raise ConfigError(f"{_shown(value)}: must be at most {meta['le']:g}", where)


def _convert(default: Any, value: Any, warnings: list[str], where: str) -> Any:
    if _is_model(default):
        return from_mapping(type(default), value, warnings=warnings, where=where)
    if isinstance(default, tuple | list):
        if value is None:
            return type(default)()
        if not isinstance(value, list):
            raise ConfigError("expected a list", where)
        items = (_convert("", v, warnings, f"{where}[{i}]") for i, v in enumerate(value))
        return type(default)(items)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError("expected true or false", where)
        return value
    if isinstance(default, str):
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError("expected a string", where)
        if isinstance(value, int) and not _printable_int(value):
            raise ConfigError(f"{_shown(value)}, expected a string", where)
        return str(value)
    if isinstance(default, float):
        if isinstance(value, str):
            return parse_duration(value, where=where)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError("expected a number or a duration such as 60s", where)
        if not 0 <= value <= MAX_DURATION_S:  # NaN too
            raise ConfigError(
                f"{_shown(value)} is not a duration of 0 to {MAX_DURATION_S:.0f} seconds", where
            )
        return float(value)
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError("expected a whole number", where)
        if not -(2**63) <= value < 2**63:
            raise ConfigError(f"{_shown(value)} is not a 64-bit whole number", where)
        return value
    return value  # a field without a typed default takes the value as it is


def _from_text(default: Any, text: str) -> Any:
    """An environment variable's text as the value a file would hold for the field."""
    if isinstance(default, bool):
        word = text.strip().lower()
        if word in ("true", "1", "yes", "on"):
            return True
        if word in ("false", "0", "no", "off"):
            return False
        return text
    if isinstance(default, tuple | list):
        import json

        try:
            return json.loads(text)
        except ValueError:
            return text  # refused as "expected a list"
    if isinstance(default, int | float):
        for number in (int, float):
            try:
                return number(text)
            except ValueError:
                pass
    return text


def _shown(value: object) -> str:
    from nfd.chars import shown

    return shown(value)


def _printable_int(value: int) -> bool:
    import sys

    limit = sys.get_int_max_str_digits()
    return limit == 0 or value.bit_length() < limit * 3  # 2**3 < 10: fewer bits, fewer digits


# Go's longest time.Duration, 2**63-1 ns (about 292 years): a longer one does not parse
# there, and here it would overflow the scheduler's datetime arithmetic.
MAX_DURATION_S = (2**63 - 1) / 1e9
_DURATION = r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)"  # compiled on first use
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, *, where: str = "duration") -> float:
    """Go's duration syntax (``1h30m``, ``60s``, ``500ms``) in seconds; ``where`` names
    the key or flag in the error."""
    import re

    s = text.strip()
    if s in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    for m in re.finditer(_DURATION, s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise ConfigError(f"{text!r} is not a duration such as 60s or 1m30s", where)
    if total > MAX_DURATION_S:
        raise ConfigError(f"{text!r} is longer than Go's longest duration (2562047h47m16s)", where)
    return total
