"""sysfs attribute readers shared by the device sources (pci, usb, network, storage,
memory).

sysfs has its own ways of saying "nothing here": a missing file, and for some
attributes EINVAL on read (``speed`` of a link that is down). Both mean the attribute
is absent and are silent; any other error is logged with the path and the caller goes
on without that attribute.
"""

from __future__ import annotations

import errno
import os

from nfd.lazylog import get_logger

log = get_logger("nfd.sources")

# Errors that mean "this attribute has no value here", not "something is wrong".
_PAGE = 8192
_QUIET_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.ENODEV, errno.EOPNOTSUPP})


def _read(path: str, *, whole: bool) -> bytes | None:
    # os.open/os.read: about half the cost of open() on sysfs, and sysfs reads are most
    # of a pass's time.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        if e.errno not in _QUIET_ERRNOS:
            log.warning("cannot read %s: %s", path, e.strerror or e)
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
        if e.errno not in _QUIET_ERRNOS:
            log.warning("cannot read %s: %s", path, e.strerror or e)
        return None
    finally:
        os.close(fd)
    return data


def attr(path: str) -> str | None:
    """One sysfs attribute (at most a page, by the kernel's contract), stripped; None
    when absent or unreadable."""
    data = _read(path, whole=False)
    return None if data is None else data.decode("utf-8", "replace").strip()


def text(path: str) -> str | None:
    """A whole file (procfs tables, os-release), stripped; None when absent or unreadable."""
    data = _read(path, whole=True)
    return None if data is None else data.decode("utf-8", "replace").strip()


def link_name(path: str) -> str | None:
    """The last component of a symlink's target (``driver``, ``iommu_group``)."""
    try:
        return os.path.basename(os.readlink(path))
    except OSError as e:
        if e.errno not in _QUIET_ERRNOS:
            log.warning("cannot read link %s: %s", path, e.strerror or e)
        return None


def entries(path: str) -> list[str] | None:
    """Sorted names in a directory; None when the directory is absent."""
    try:
        return sorted(os.listdir(path))
    except OSError as e:
        if e.errno not in _QUIET_ERRNOS:
            log.warning("cannot list %s: %s", path, e.strerror or e)
        return None
