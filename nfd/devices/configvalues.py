"""The device config's values: the parse functions of its models' keys (one per kind of
value, each raising a :class:`ConfigError` at the key's path), and what a container gets
(device nodes, mounts, environment, their ``{placeholder}`` templates)."""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nfd.devices.kinds.model import DeviceNode, Mount
from nfd.settings import ConfigError, from_mapping

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError("expected a string", where)
    return value


def checked(error: Callable[[str], str | None], what: str) -> Callable[[Any, str], str]:
    def parse(value: Any, where: str) -> str:
        err = error(parse_string(value, where))
        if err:
            raise ConfigError(f"{what}: {err}", where)
        return str(value)

    return parse


def one_of(*choices: str) -> Callable[[Any, str], str]:
    def parse(value: Any, where: str) -> str:
        if not isinstance(value, str) or value not in choices:
            raise ConfigError(f"{value!r} is not one of {', '.join(choices)}", where)
        return value

    return parse


def parse_items(value: Any, where: str) -> list[Any]:
    """A list; null (a key left empty in YAML, ``deviceNodes:``) is an empty one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError("expected a list", where)
    return value


def parse_device_nodes(value: Any, where: str) -> tuple[DeviceNode, ...]:
    out = []
    for i, raw in enumerate(parse_items(value, where)):
        at = f"{where}[{i}]"
        spec = from_mapping(
            _DeviceNodeSpec, {"path": raw} if isinstance(raw, str) else raw, warnings=[], where=at
        )
        if not spec.path.startswith("/dev/"):
            raise ConfigError("device nodes live under /dev/", f"{at}.path")
        perms = spec.permissions
        if not perms or set(perms) - set("rwm") or len(set(perms)) != len(perms):
            raise ConfigError("expected some of r, w, m (like rw or rwm)", f"{at}.permissions")
        out.append(DeviceNode(spec.path, spec.container_path or spec.path, perms))
    return tuple(out)


def parse_mounts(value: Any, where: str) -> tuple[Mount, ...]:
    out = []
    for i, raw in enumerate(parse_items(value, where)):
        spec = from_mapping(_MountSpec, raw, warnings=[], where=f"{where}[{i}]")
        out.append(Mount(spec.host_path, spec.container_path or spec.host_path, spec.read_only))
    return tuple(out)


def parse_env(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """``{NAME: value}`` -> ``((NAME, value), ...)``; numbers are taken as strings."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise ConfigError("expected a mapping of NAME: value", where)
    out = []
    for k, v in value.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            raise ConfigError(f"{k!r} is not a valid environment variable name", where)
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise ConfigError("expected a string", f"{where}.{k}")
        out.append((k, str(v)))
    return tuple(out)


def strict(kind: type) -> Callable[[Any, str], Any]:
    """A value of exactly this type (YAML's 1 is no true, "2" no 2)."""

    def parse(value: Any, where: str) -> Any:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(f"expected {'true or false' if kind is bool else 'a whole number'}", where)
        return value

    return parse


def template_error(text: str, fields: frozenset[str]) -> str | None:
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as e:
        return f"bad template {text!r}: {e}"
    for _lit, name, spec, conv in parsed:
        if name is not None and (name not in fields or spec or conv):
            known = ", ".join("{" + f + "}" for f in sorted(fields))
            return f"unknown placeholder {{{name}}} (known: {known})"
    return None


@dataclass(frozen=True)
class _DeviceNodeSpec:
    __unknown_keys__: ClassVar[str] = "error"
    path: str = field(metadata={"parse": parse_string})
    container_path: str = field(default="", metadata={"parse": parse_string})
    permissions: str = field(default="rwm", metadata={"parse": parse_string})


@dataclass(frozen=True)
class _MountSpec:
    __unknown_keys__: ClassVar[str] = "error"
    host_path: str = field(metadata={"parse": parse_string})
    container_path: str = field(default="", metadata={"parse": parse_string})
    read_only: bool = field(default=True, metadata={"parse": strict(bool)})
