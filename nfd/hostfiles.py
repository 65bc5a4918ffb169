"""Reading the host's files (sysfs, procfs, /etc ...): the one reader every room uses.

A missing path means "feature absent" and is silent; so are the other ways sysfs says
"nothing here" (EINVAL on read, e.g. ``speed`` of a link that is down, ENODEV,
EOPNOTSUPP). Anything else costs that one value, never the caller: it is logged with
the path and the reader answers None. In particular:

- a read never blocks: files are opened non-blocking, so a FIFO or a terminal where a
  sysfs file should be answers at once, and one that gives nothing or would block is
  refused as not a regular file (a device that does give bytes meets the bounds and
  checks below like any file);
- every read is bounded (``MAX_BYTES``; a sysfs attribute is one page), and a file over
  the bound is refused rather than cut;
- text with a NUL byte inside is refused (trailing NULs, firmware padding, are
  dropped); a number is at most 19 digits.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from typing import TYPE_CHECKING

from nfd.chars import printable

if TYPE_CHECKING:
    from collections.abc import Iterable

log = logging.getLogger(__name__)

PAGE = 8192
"""A sysfs attribute is at most a page by the kernel's contract."""
MAX_BYTES = 4 * 1024 * 1024
"""The most any one host file may hold (a kernel config is about 300 kB)."""

# Errors that mean "this value is not here", not "something is wrong".
_QUIET_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.ENODEV, errno.EOPNOTSUPP})
# os.open/os.read: about half the cost of open() on sysfs, and sysfs reads are most of
# a discovery pass's time. Non-blocking: a FIFO or a terminal where a file should be
# answers at once (nothing, or EAGAIN) instead of waiting for a writer.
_OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY

StrPath = str | os.PathLike[str]


def _complain(what: str, path: StrPath, e: OSError) -> None:
    if e.errno not in _QUIET_ERRNOS:
        log.warning("cannot %s %s: %s", what, printable(os.fspath(path)), e.strerror or e)


def read_bytes(path: StrPath, *, limit: int = MAX_BYTES) -> bytes | None:
    """The file's bytes, or None (absent, unreadable, not a regular file, or more than
    ``limit`` bytes)."""
    return _read(path, limit, whole=False)


def _read(path: StrPath, limit: int, *, whole: bool) -> bytes | None:
    """``whole``: the file comes in one read (a sysfs attribute: the kernel hands it out
    whole); else read to the end."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError) as e:
        _not_opened(path, e)
        return None
    try:
        data = os.read(fd, limit + 1 if whole else PAGE)
        if data and not whole:
            # procfs hands out seq_file pages one read at a time: read to the end (one
            # byte past the limit, to know).
            chunks = [data]
            size = len(data)
            while size <= limit and (chunk := os.read(fd, min(65536, limit + 1 - size))):
                chunks.append(chunk)
                size += len(chunk)
            if len(chunks) > 1:
                data = b"".join(chunks)
        elif not data and _not_regular(fd, path):
            return None
    except OSError as e:
        _read_failed(fd, path, e)
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        _too_big(path, limit)
        return None
    return data


def read_text(path: StrPath) -> str | None:
    """The whole file as text, unstripped, or None."""
    return _text(path, read_bytes(path))


def read_line(path: StrPath) -> str | None:
    """The whole file (a procfs table, os-release, a one-value knob), stripped, or None."""
    t = _text(path, read_bytes(path))
    return None if t is None else t.strip()


def attr(path: StrPath) -> str | None:
    """One sysfs attribute (at most a page, in one read), stripped, or None."""
    data = _read(path, PAGE, whole=True)
    if data is None:
        return None
    if b"\0" in data:
        t = _text(path, data)
        return None if t is None else t.strip()
    return data.decode("utf-8", "replace").strip()


def _not_opened(path: StrPath, e: OSError | ValueError) -> None:
    # ValueError: a NUL byte in the path (built from another file's value): absent.
    if isinstance(e, OSError):
        _complain("read", path, e)


def _not_regular(fd: int, path: StrPath) -> bool:
    """Whether an open file that gave nothing (or would have blocked) is not a regular
    file. Asked only then: fstat on every read would cost a tenth of a discovery pass."""
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return False
    log.warning("cannot read %s: not a regular file", printable(os.fspath(path)))
    return True


def _read_failed(fd: int, path: StrPath, e: OSError) -> None:
    if e.errno == errno.EAGAIN and _not_regular(fd, path):
        return
    _complain("read", path, e)


def _too_big(path: StrPath, limit: int) -> None:
    log.warning("cannot read %s: more than %d bytes", printable(os.fspath(path)), limit)


def _text(path: StrPath, data: bytes | None) -> str | None:
    if data is None:
        return None
    if b"\0" in data:
        data = data.rstrip(b"\0")  # trailing NULs: firmware padding
        if b"\0" in data:
            log.warning("ignoring %s: a NUL byte inside its text", printable(os.fspath(path)))
            return None
    return data.decode("utf-8", "replace")


def entries(path: StrPath) -> list[str] | None:
    """Sorted names in a directory; None when the directory is absent."""
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        _complain("list", path, e)
        return None
    except ValueError:
        return None


def list_dir(path: StrPath) -> list[str]:
    """Sorted names in a directory; empty when it is absent."""
    return entries(path) or []


def device_dirs(path: StrPath) -> list[str] | None:
    """The entries of a sysfs directory of devices (``/sys/bus/pci/devices``, ``/sys/block``
    ...) as paths, in name order; None when the directory is absent."""
    names = entries(path)
    if names is None:
        return None
    base = os.fspath(path)
    return [os.path.join(base, n) for n in names]


def attrs(device_dir: StrPath, files: Iterable[str]) -> dict[str, str]:
    """The sysfs attributes ``files`` (paths below ``device_dir``, ``queue/rotational``) that
    are there, each keyed by its last component."""
    out: dict[str, str] = {}
    for file in files:
        value = attr(os.path.join(device_dir, file))
        if value is not None:
            out[os.path.basename(file)] = value
    return out


def link_name(path: StrPath) -> str | None:
    """The last component of a symlink's target (``driver`` -> ``vfio-pci``,
    ``iommu_group``), or None (also when the path is not a link)."""
    try:
        return os.path.basename(os.readlink(path))
    except OSError as e:
        _complain("read link", path, e)
        return None
    except ValueError:
        return None


def exists(path: StrPath) -> bool:
    return os.path.exists(path)


def int_value(text: str | None) -> int | None:
    """A decimal integer of at most 19 digits (an optional sign), or None: a sysfs or
    procfs number, which no host writes longer."""
    if text is None:
        return None
    digits = text[1:] if text[:1] in ("-", "+") else text
    if not digits.isdigit() or len(digits) > 19 or not digits.isascii():
        return None
    return int(text)


def numa_node(text: str | None) -> int | None:
    """A device's ``numa_node``: its node, or None for ``-1`` (no affinity) or nonsense."""
    n = int_value(text)
    return n if n is not None and n >= 0 else None


def numa_above(sysfs_dir: StrPath, sys_root: StrPath) -> int | None:
    """The NUMA node of the nearest ancestor device (resolving sysfs links) that has a
    ``numa_node`` file: a USB device or a char device hangs below a PCI controller."""
    try:
        cur = os.path.realpath(sysfs_dir)
        stop = os.path.realpath(sys_root)
    except (OSError, ValueError):
        return None
    while cur != stop and cur.startswith(stop + "/"):
        f = os.path.join(cur, "numa_node")
        if os.path.exists(f):
            return numa_node(attr(f))
        cur = os.path.dirname(cur)
    return None


def driver_name(device_dir: StrPath) -> str | None:
    """A device's bound driver, or None when unbound."""
    return link_name(os.path.join(device_dir, "driver"))
