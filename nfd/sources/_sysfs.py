"""sysfs attribute readers shared by the device sources (pci, usb, network, storage,
memory).

sysfs has its own ways of saying "nothing here": a missing file, and for some
attributes EINVAL on read (``speed`` of a link that is down). Both mean the attribute
is absent and are silent; any other error is logged with the path and the caller goes
on without that attribute.
"""

from __future__ import annotations

import errno
import logging
import os

log = logging.getLogger("nfd.sources")

# Errors that mean "this attribute has no value here", not "something is wrong".
_QUIET_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EINVAL, errno.ENODEV, errno.EOPNOTSUPP})


def attr(path: str) -> str | None:
    """One sysfs attribute, stripped; None when absent or unreadable."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        if e.errno not in _QUIET_ERRNOS:
            log.warning("cannot read %s: %s", path, e.strerror or e)
        return None
    return data.decode("utf-8", "replace").strip()


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
