"""Notice changes to the local source's features.d directory.

inotify (through ctypes; no extra package) when the kernel offers it and the directory
exists, else a cheap poll of the directory's entries and their mtimes. The watcher only
says "something changed"; the pass that follows re-reads the files.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import select
import struct
from collections.abc import Callable
from pathlib import Path

from nfd.loopthread import LoopThread

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.5

# inotify(7) constants.
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_IGNORED = 0x8000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO
    | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF
)  # fmt: skip
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len

Snapshot = frozenset[tuple[str, int, int]]


class DirWatcher:
    """Calls ``on_change(reason)`` (from its own thread) when the directory changes."""

    def __init__(self, path: Path, on_change: Callable[[str], None], *, use_inotify: bool = True) -> None:
        self.path = path
        self._on_change = on_change
        self._use_inotify = use_inotify
        self._libc: ctypes.CDLL | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._loop = LoopThread(
            "nfd-watch", self._round, interval=0.0, on_stop=self._unblock, join_timeout=2, logger=log
        )
        self.mode = "stopped"  # "inotify" or "poll" while running; for logs and tests

    def start(self) -> None:
        self._libc = _libc() if self._use_inotify else None
        if self._use_inotify and self._libc is None:
            log.info("inotify is not available; polling %s every %.1fs", self.path, POLL_INTERVAL)
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    def _unblock(self) -> None:
        os.write(self._wake_w, b"x")

    # -- the thread -----------------------------------------------------------------
    def _round(self) -> None:
        """Watch until the directory comes or goes (or stop)."""
        if self._libc is not None and self.path.is_dir():
            if self._watch_inotify(self._libc):
                return
            self._libc = None  # inotify refused us (limits): poll from now on
            log.info("inotify failed; polling %s every %.1fs", self.path, POLL_INTERVAL)
        self._watch_poll(until_dir_exists=self._libc is not None)

    def _watch_inotify(self, libc: ctypes.CDLL) -> bool:
        """Watch until the directory goes away (or stop); False if inotify cannot be used."""
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            log.debug("inotify_init1: %s", os.strerror(ctypes.get_errno()))
            return False
        try:
            wd = libc.inotify_add_watch(fd, os.fsencode(self.path), _MASK)
            if wd < 0:
                err = ctypes.get_errno()
                if err == errno.ENOENT:
                    return True  # gone between the check and the watch: look again
                log.debug("inotify_add_watch %s: %s", self.path, os.strerror(err))
                return False
            self.mode = "inotify"
            while not self._loop.stopping:
                ready, _, _ = select.select([fd, self._wake_r], [], [])
                if fd not in ready:
                    continue
                try:
                    buf = os.read(fd, 64 * 1024)
                except BlockingIOError:
                    continue
                names, gone = _parse_events(buf)
                if names or gone:
                    self._on_change(f"features.d: {', '.join(sorted(names)) or self.path.name}")
                if gone:
                    return True
            return True
        finally:
            os.close(fd)

    def _watch_poll(self, *, until_dir_exists: bool) -> None:
        """Poll mtimes; with ``until_dir_exists``, hand back to inotify once the
        directory is there."""
        before = _snapshot(self.path)
        self.mode = "poll"
        while not self._loop.sleep(POLL_INTERVAL):
            now = _snapshot(self.path)
            if now != before:
                changed = sorted({n for n, *_ in now ^ before})
                self._on_change(f"features.d: {', '.join(changed) or self.path.name}")
                before = now
            if until_dir_exists and self.path.is_dir():
                return


def _parse_events(buf: bytes) -> tuple[set[str], bool]:
    names: set[str] = set()
    gone = False
    pos = 0
    while pos + _EVENT.size <= len(buf):
        _wd, mask, _cookie, length = _EVENT.unpack_from(buf, pos)
        raw = buf[pos + _EVENT.size : pos + _EVENT.size + length].rstrip(b"\0")
        pos += _EVENT.size + length
        if mask & (_IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED):
            gone = True
        elif raw:
            names.add(os.fsdecode(raw))
    return names, gone


def _snapshot(path: Path) -> Snapshot:
    """Entry names with mtime and size; the directory itself as ``""``. Cheap: one
    scandir and one stat per file (a features.d holds a handful)."""
    try:
        st = path.stat()
        out = {("", st.st_mtime_ns, 0)}
        with os.scandir(path) as it:
            for e in it:
                try:
                    s = e.stat()
                except OSError:
                    continue
                out.add((e.name, s.st_mtime_ns, s.st_size))
        return frozenset(out)
    except OSError:
        return frozenset()


def _libc() -> ctypes.CDLL | None:
    try:
        # The interpreter is linked against libc: its own symbols include inotify's.
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None
