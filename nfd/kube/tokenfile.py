"""A bearer token kept in a file that its owner rewrites (kubelet's projected
service-account token; the worker's token for the master): read again only when the
file's status changed, and at least once a minute in any case.

Its own module, with no more than ``os`` and ``time``, so that a client which needs
only the token (the worker's, to the master) does not load the kubeconfig loader with
it."""

from __future__ import annotations

import os
import time

# A token file unchanged in status is read again after this long anyway: a rewrite in
# place within one tick of the file system's clock keeps its status.
TOKEN_REREAD_S = 60.0


class TokenFile:
    """A token file's content, read again when the file's status (inode, size, change
    time) differs from the last read's, or TOKEN_REREAD_S after it: one stat per
    request instead of an open and a read."""

    def __init__(self, path: str) -> None:
        self.path = path
        # (the file's status, its content, when read): replaced whole, so threads
        # sharing the transport see one read's three together.
        self._last: tuple[tuple[int, int, int, int], str, float] | None = None

    def read(self) -> str:
        """The token; raises OSError."""
        st = os.stat(self.path)
        status = (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns)
        now = time.monotonic()
        last = self._last
        if last is not None and last[0] == status and now - last[2] < TOKEN_REREAD_S:
            return last[1]
        with open(self.path, encoding="utf-8") as f:
            token = f.read().strip()
        self._last = (status, token, now)
        return token
