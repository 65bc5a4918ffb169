"""Where the host's filesystems are.

A worker in a pod sees the host's /sys, /proc, /etc ... mounted read-only under a
prefix (``/host-sys``, ``/host-proc`` ...), tests see a fixture tree, and a plain
process sees ``/``. Every source takes a :class:`HostRoot` instead of naming paths.

The parts are :class:`HostPath` strings, not :class:`pathlib.Path`: importing pathlib
(with the ``re``, ``fnmatch`` and ``urllib.parse`` it pulls in) cost ``nfd discover``
about a quarter of its run, and sources only join names and hand the result to ``os``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping


class HostPath(str):
    """A path as a plain ``str`` that joins with ``/`` as a Path does (an absolute right
    side replaces the left). Anything that takes a path (``os``, ``open``, ``Path``)
    takes it as it is."""

    __slots__ = ()

    def __truediv__(self, other: str) -> HostPath:
        return HostPath(os.path.join(self, other))

    @property
    def name(self) -> str:
        return os.path.basename(self)

    @property
    def parent(self) -> HostPath:
        return HostPath(os.path.dirname(self) or ".")

    def exists(self) -> bool:
        return os.path.exists(self)

    def is_dir(self) -> bool:
        return os.path.isdir(self)

    def is_file(self) -> bool:
        return os.path.isfile(self)


def host_path(p: str | os.PathLike[str]) -> HostPath:
    """``p`` as a HostPath, with a trailing ``/`` (but not a root's) dropped."""
    s = os.fspath(p)
    return HostPath(s.rstrip("/") or s)


# The parts of the host we read, and their place under ``/``.
_PARTS: dict[str, str] = {
    "sys": "sys",
    "proc": "proc",
    "etc": "etc",
    "boot": "boot",
    "usr_lib": "usr/lib",
    "lib": "lib",
    "dev": "dev",
    "run": "run",
    "var": "var",
}


# (part, its absolute place under /), deepest first: /usr/lib is matched before /usr.
_PARTS_DEEPEST_FIRST = tuple(sorted(((k, "/" + v) for k, v in _PARTS.items()), key=lambda kv: -len(kv[1])))


# No slots: a process holds one or two; not printed (see docs/architecture.md, "Plain Python").
@dataclass(frozen=True, repr=False)
class HostRoot:
    """Where each part of the host's filesystem is (below ``/`` by default)."""

    sys: HostPath = HostPath("/sys")
    proc: HostPath = HostPath("/proc")
    etc: HostPath = HostPath("/etc")
    boot: HostPath = HostPath("/boot")
    usr_lib: HostPath = HostPath("/usr/lib")
    lib: HostPath = HostPath("/lib")
    dev: HostPath = HostPath("/dev")
    run: HostPath = HostPath("/run")
    var: HostPath = HostPath("/var")

    def __post_init__(self) -> None:
        # Callers may pass Paths or plain strings; every part is kept as a HostPath.
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not HostPath:
                object.__setattr__(self, f.name, host_path(value))

    @classmethod
    def under(cls, root: str | os.PathLike[str]) -> HostRoot:
        """All parts below one directory laid out like ``/`` (fixture trees, chroots)."""
        base = host_path(root)
        return cls(**{name: base / rel for name, rel in _PARTS.items()})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HostRoot:
        """Build from the environment.

        ``NFD_HOST_ROOT=/x`` puts every part under ``/x``; ``NFD_HOST_PREFIX=/host-`` puts
        each part at ``/host-<part>`` as upstream's worker DaemonSet mounts them
        (``/host-sys``, ``/host-usr/lib`` ...). ``NFD_HOST_SYS``, ``NFD_HOST_PROC``,
        ``NFD_HOST_USR_LIB`` ... override one part each.
        """
        env = os.environ if environ is None else environ
        if env.get("NFD_HOST_ROOT"):
            host = cls.under(env["NFD_HOST_ROOT"])
        elif env.get("NFD_HOST_PREFIX"):
            prefix = env["NFD_HOST_PREFIX"]
            host = cls(**{name: HostPath(prefix + rel) for name, rel in _PARTS.items()})
        else:
            host = cls()
        overrides = {
            name: host_path(env[var])
            for name in (f.name for f in fields(cls))
            if (var := "NFD_HOST_" + name.upper()) in env and env[var]
        }
        return replace(host, **overrides) if overrides else host

    def resolve(self, path: str) -> HostPath | None:
        """``path`` (below one of the parts) with its symlinks followed as the host
        would: an absolute target (``etc/os-release -> /usr/lib/os-release``) is taken
        inside the host root, not the container's, and so is a relative one that climbs
        out of its part (``/host-etc/../usr/lib`` is ``/host-usr/lib``). None when a link
        leads outside the parts, or loops. A path below no part is returned as it is."""
        if all(getattr(self, name) == place for name, place in _PARTS_DEEPEST_FIRST):
            return HostPath(path)  # the host is "/": the kernel resolves its links as they are
        logical = self._logical(path)
        if logical is None:
            return HostPath(path)
        # done: the resolved part, in host terms; act: where it is here, once below a part
        # (no part lies inside another, so below one a name just joins on).
        done, act, todo, hops = "", "", logical.split("/")[::-1], 0
        while todo:
            comp = todo.pop()
            if comp in ("", "."):
                continue
            if comp == "..":
                done, act = done.rpartition("/")[0], ""
                continue
            cand = f"{done}/{comp}"
            actual = f"{act}/{comp}" if act else self._actual(cand)
            if actual is None:
                return None
            try:
                target = os.readlink(actual) if actual else ""
            except (FileNotFoundError, NotADirectoryError):
                if ".." not in todo:  # nothing below a missing name can be a link
                    return HostPath("/".join([actual, *reversed(todo)]))
                target = ""
            except (OSError, ValueError):
                target = ""
            if not target:
                done, act = cand, actual
                continue
            hops += 1
            if hops > 40:  # as the kernel's ELOOP
                return None
            todo += target.split("/")[::-1]
            act = ""
            if target.startswith("/"):
                done = ""
        actual = self._actual(done)
        return HostPath(actual) if actual else None

    def _logical(self, path: str) -> str | None:
        """Where ``path`` is on the host (``/host-etc/x`` -> ``/etc/x``), or None."""
        best: tuple[int, str] | None = None
        for name, rel in _PARTS_DEEPEST_FIRST:
            base: str = getattr(self, name)
            if path.startswith(base) and (best is None or len(base) > best[0]):
                rest = path[len(base) :]
                if not rest or rest[0] == "/":
                    best = (len(base), rel + rest)
        return None if best is None else best[1]

    def _actual(self, logical: str) -> str | None:
        """Where host path ``logical`` is here; "" for a directory above the parts (not
        read, only passed through), None outside them."""
        for name, rel in _PARTS_DEEPEST_FIRST:
            if logical == rel or logical.startswith(rel + "/"):
                base: str = getattr(self, name)
                return base + logical[len(rel) :]
        if not logical or any(rel.startswith(logical + "/") for _, rel in _PARTS_DEEPEST_FIRST):
            return ""
        return None

    def describe(self) -> dict[str, str]:
        return {f.name: str(getattr(self, f.name)) for f in fields(self)}
