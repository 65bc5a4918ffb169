"""Where the host's filesystems are.

A worker in a pod sees the host's /sys, /proc, /etc ... mounted read-only under a
prefix (``/host-sys``, ``/host-proc`` ...), tests see a fixture tree, and a plain
process sees ``/``. Every source takes a :class:`HostRoot` instead of naming paths.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from nfd.record import Record, record_fields, replace

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


class HostRoot(Record, frozen=True):
    sys: Path = Path("/sys")
    proc: Path = Path("/proc")
    etc: Path = Path("/etc")
    boot: Path = Path("/boot")
    usr_lib: Path = Path("/usr/lib")
    lib: Path = Path("/lib")
    dev: Path = Path("/dev")
    run: Path = Path("/run")
    var: Path = Path("/var")

    @classmethod
    def under(cls, root: str | os.PathLike[str]) -> HostRoot:
        """All parts below one directory laid out like ``/`` (fixture trees, chroots)."""
        base = Path(root)
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
            host = cls(**{name: Path(prefix + rel) for name, rel in _PARTS.items()})
        else:
            host = cls()
        overrides = {
            name: Path(env[var])
            for name in record_fields(cls)
            if (var := "NFD_HOST_" + name.upper()) in env and env[var]
        }
        return replace(host, **overrides) if overrides else host

    def describe(self) -> dict[str, str]:
        return {name: str(getattr(self, name)) for name in record_fields(self)}
