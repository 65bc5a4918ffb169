"""Small, forgiving readers for sysfs/procfs.

A missing path means "feature absent" and returns None/empty silently; any other OS
error is logged once with the path and the caller goes on.
"""

from __future__ import annotations

import os
from pathlib import Path

from nfd.lazylog import get_logger

log = get_logger("nfd.sources")

_ABSENT = (FileNotFoundError, NotADirectoryError)


def read_text(path: str | os.PathLike[str]) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except _ABSENT:
        return None
    except OSError as e:
        log.warning("cannot read %s: %s", path, e.strerror or e)
        return None


def read_line(path: str | os.PathLike[str]) -> str | None:
    """The file's content, stripped (sysfs attributes are one line)."""
    text = read_text(path)
    return None if text is None else text.strip()


def read_bytes(path: str | os.PathLike[str]) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except _ABSENT:
        return None
    except OSError as e:
        log.warning("cannot read %s: %s", path, e.strerror or e)
        return None


def list_dir(path: str | os.PathLike[str]) -> list[str]:
    """Sorted entry names; empty when the directory is absent."""
    try:
        return sorted(os.listdir(path))
    except _ABSENT:
        return []
    except OSError as e:
        log.warning("cannot list %s: %s", path, e.strerror or e)
        return []


def read_link_name(path: str | os.PathLike[str]) -> str | None:
    """The last component of a symlink's target (sysfs ``driver``, ``iommu_group``)."""
    try:
        return os.path.basename(os.readlink(path))
    except _ABSENT:
        return None
    except OSError as e:
        if e.errno == 22:  # EINVAL: not a link
            return None
        log.warning("cannot read link %s: %s", path, e.strerror or e)
        return None


def parse_env_file(text: str) -> dict[str, str]:
    """``KEY=value`` lines as in os-release: quotes removed, comments skipped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
            v = v[1:-1]
        out[k.strip()] = v
    return out


def exists(path: str | os.PathLike[str]) -> bool:
    return Path(path).exists()
