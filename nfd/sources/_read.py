"""Forgiving readers for sysfs, procfs and /etc, shared by every source.

A missing path means "feature absent" and is silent; so are the other ways sysfs says
"nothing here" (EINVAL on read, e.g. ``speed`` of a link that is down, ENODEV,
EOPNOTSUPP). Any other error is logged with the path and the caller goes on without
that value.
"""

from __future__ import annotations

import errno
import os

from nfd.lazylog import get_logger

log = get_logger("nfd.sources")

_PAGE = 8192
# Errors that mean "this value is not here", not "something is wrong".
_QUIET_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.ENODEV, errno.EOPNOTSUPP})

StrPath = str | os.PathLike[str]


def _complain(what: str, path: StrPath, e: OSError) -> None:
    if e.errno not in _QUIET_ERRNOS:
        log.warning("cannot %s %s: %s", what, os.fspath(path), e.strerror or e)


def read_bytes(path: StrPath, *, whole: bool = True) -> bytes | None:
    """The file's bytes (only the first page unless ``whole``), or None."""
    # os.open/os.read: about half the cost of open() on sysfs, and sysfs reads are most
    # of a discovery pass's time.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        _complain("read", path, e)
        return None
    try:
        data = os.read(fd, _PAGE)
        if whole and data:
            # procfs hands out seq_file pages one read at a time: read to the end.
            chunks = [data]
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            data = b"".join(chunks)
    except OSError as e:
        _complain("read", path, e)
        return None
    finally:
        os.close(fd)
    return data


def read_text(path: StrPath) -> str | None:
    """The whole file as text, unstripped, or None."""
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace")


def text(path: StrPath) -> str | None:
    """The whole file (procfs tables, os-release), stripped, or None."""
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8", "replace").strip()


def attr(path: StrPath) -> str | None:
    """One sysfs attribute (at most a page, by the kernel's contract), stripped, or None."""
    data = read_bytes(path, whole=False)
    return None if data is None else data.decode("utf-8", "replace").strip()


def read_line(path: StrPath) -> str | None:
    """A one-value file (sysfs attribute, procfs knob), stripped, or None."""
    return text(path)


def entries(path: StrPath) -> list[str] | None:
    """Sorted names in a directory; None when the directory is absent."""
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        _complain("list", path, e)
        return None


def list_dir(path: StrPath) -> list[str]:
    """Sorted names in a directory; empty when it is absent."""
    return entries(path) or []


def link_name(path: StrPath) -> str | None:
    """The last component of a symlink's target (``driver``, ``iommu_group``), or None
    (also when the path is not a link)."""
    try:
        return os.path.basename(os.readlink(path))
    except OSError as e:
        _complain("read link", path, e)
        return None



def exists(path: StrPath) -> bool:
    return os.path.exists(path)


def parse_env_file(content: str) -> dict[str, str]:
    """``KEY=value`` lines as in os-release: quotes removed, comments skipped."""
    out: dict[str, str] = {}
    for line in content.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
            v = v[1:-1]
        out[k.strip()] = v
    return out
