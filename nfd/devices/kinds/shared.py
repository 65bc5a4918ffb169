"""What the device kinds share: their selectors' keys parsed (strings or lists of them,
mappings with known keys, hex ids), a kind's template fields described, and why a PCI
function cannot be handed out."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from nfd import hostfiles
from nfd.chars import shown
from nfd.devices.kinds.model import Gone
from nfd.hostroot import HostRoot
from nfd.settings import ConfigError, key_name


def string_list(raw: Any, where: str) -> tuple[str, ...]:
    """A string or a list of strings. Numbers are refused: YAML reads ``0300`` as an octal
    number and ``8086`` as an int, so hex IDs must be quoted."""
    items = [raw] if not isinstance(raw, list) else raw
    if not items:
        raise ConfigError(f"{where}: must not be empty")
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, str):
            hint = " (quote hex IDs: YAML reads 0300 or 8086 as numbers)" if isinstance(item, int) else ""
            raise ConfigError(f"{where}: expected a string or a list of strings, got {shown(item)}{hint}")
        if not item.strip():
            raise ConfigError(f"{where}: empty string")
        out.append(item.strip())
    return tuple(out)


def mapping(raw: Any, where: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with keys {', '.join(allowed)}")
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"{where}.{key_name(key)}: unknown selector key (known: {', '.join(allowed)})")
    if not raw:
        raise ConfigError(f"{where}: empty selector (use at least one of {', '.join(allowed)})")
    return raw


def hex_ids(raw: Any, where: str, width: int) -> tuple[str, ...]:
    """Hex IDs (``8086``, ``0x8086``), lower-cased without ``0x``."""
    out = []
    for item in string_list(raw, where):
        v = item.lower().removeprefix("0x")
        if not v or len(v) > width or any(c not in "0123456789abcdef" for c in v):
            raise ConfigError(f"{where}: {item!r} is not a hex ID of at most {width} digits")
        out.append(v)
    return tuple(out)


def optional_strings(m: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    """:func:`string_list` of ``m[key]``; empty when the selector does not give the key."""
    return string_list(m[key], f"{where}.{key}") if key in m else ()


def optional_hex_ids(m: dict[str, Any], key: str, where: str, width: int) -> tuple[str, ...]:
    """:func:`hex_ids` of ``m[key]``; empty when the selector does not give the key."""
    return hex_ids(m[key], f"{where}.{key}", width) if key in m else ()


def describe_fields(kind: str, fields: Iterable[tuple[str, str | Sequence[str]]]) -> str:
    """``kind k=v k=a|b`` for a selector's non-empty fields (``--check`` output, logs)."""
    parts = [f"{k}={v if isinstance(v, str) else '|'.join(v)}" for k, v in fields if v]
    return " ".join([kind, *parts])


# -- helpers for kinds' health -------------------------------------------------------------


def pci_problem(host: HostRoot, address: str, driver: str) -> str | None:
    """Why the PCI device at ``address`` is not usable now (gone from sysfs, or ``driver``
    no longer bound to it); None when it is. An empty ``driver`` asks for none."""
    # One join (HostPath's "/" is a call per part), and the driver's link first: a
    # device still bound (the usual answer, at every health poll and DRA prepare) is then
    # one system call; the directory is looked at only when the link is not there.
    sysdir = os.path.join(host.sys, "bus/pci/devices", address)
    have = hostfiles.driver_name(sysdir) if driver else None
    if have is None and not os.path.isdir(sysdir):
        return Gone("PCI device gone from sysfs")
    if driver:
        if have is None:
            return f"driver {driver} unbound"
        if have != driver:
            return f"driver changed from {driver} to {have}"
    return None
