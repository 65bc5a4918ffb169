"""A gRPC server on a unix socket file that may be deleted under it, as kubelet's plugin
sockets are (the device plugin's and the DRA plugin's): kubelet removes every socket in
its directory when it restarts, and a re-created directory loses them all. The one
supervisor that serves such sockets again (:class:`SocketSupervisor`) lives here too."""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import grpc

from nfd.backoff import Backoff
from nfd.daemonpool import DaemonPool
from nfd.loopthread import LoopThread

# The longest unix socket path the kernel takes (sun_path is 108 bytes with the NUL).
MAX_SOCKET_PATH = 107

FileId = tuple[int, int, int]


def file_id(st: os.stat_result) -> FileId:
    """Which file this is: inode numbers alone get reused at once after a delete."""
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


class SocketServer:
    """One gRPC server on ``path``; ``add`` puts the services on each new server.
    ``make_dir``: create the socket's directory when it is missing (else serving fails
    until it is back)."""

    def __init__(
        self,
        path: str,
        add: Callable[[grpc.Server], None],
        *,
        workers: int,
        name: str,
        make_dir: bool = False,
    ) -> None:
        if len(path.encode()) > MAX_SOCKET_PATH:
            raise ValueError(f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes")
        self.path = path
        self._add = add
        self._workers = workers
        self._name = name  # its threads' name prefix
        self._make_dir = make_dir
        self._server: grpc.Server | None = None
        self._pool: DaemonPool | None = None
        self._id: FileId | None = None

    def serve(self) -> None:
        """(Re)start the server on a fresh socket file; OSError when it cannot listen."""
        self.stop()
        if self._make_dir:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        # Handlers run on daemon threads: one blocked in I/O (a claim read from an API
        # server that does not answer) must not keep a stopped plugin alive.
        pool = DaemonPool(self._workers, self._name)
        # grpc's stubs name ThreadPoolExecutor; the server only submits to it.
        server = grpc.server(pool, options=[("grpc.so_reuseport", 0)])  # type: ignore[arg-type]
        self._add(server)
        try:
            port = server.add_insecure_port("unix:" + self.path)
        except RuntimeError as e:
            raise OSError(f"cannot listen on {self.path}: {e}") from None
        if port == 0:
            raise OSError(f"cannot listen on {self.path}")
        server.start()
        self._server, self._pool = server, pool
        self._id = file_id(os.stat(self.path))

    def serving(self) -> bool:
        """Whether our socket file is still the one we listen on."""
        if self._server is None:
            return False
        try:
            return file_id(os.stat(self.path)) == self._id
        except OSError:
            return False

    def stop(self, grace: float | None = None) -> None:
        """Stop listening; calls under way get ``grace`` seconds to end (None: none)."""
        if self._server is not None:
            stopped = self._server.stop(grace=grace)
            if grace is not None:
                stopped.wait(grace + 1)
        if self._pool is not None:
            self._pool.shutdown(wait=False)  # idle threads end now, busy ones after their call
        if self._id is not None:
            try:  # remove the socket only if it is still ours
                if file_id(os.stat(self.path)) == self._id:
                    os.unlink(self.path)
            except OSError:
                pass
        self._server, self._pool, self._id = None, None, None


def remove_stale(paths: Iterable[str]) -> list[str]:
    """Remove the socket files nobody listens on any more (left by a process killed
    without its clean-up); a socket another process serves stays. Returns those removed."""
    removed = []
    for path in paths:
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue  # a connect to a regular file is refused too
        except OSError:
            continue
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            try:
                s.connect(path)
                continue
            except OSError as e:
                if e.errno != errno.ECONNREFUSED:
                    continue  # gone already, or not a socket: not ours to judge
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return removed


class Served(Protocol):
    """What :class:`SocketSupervisor` keeps serving: a :class:`SocketServer`, or a
    plugin around one."""

    def serve(self) -> None: ...

    def serving(self) -> bool: ...


@dataclass
class Watched:
    """One socket a :class:`SocketSupervisor` keeps served."""

    server: Served
    what: str  # for the log: "example.com/fpga", "DRA socket /var/lib/..."
    backoff: Backoff
    on_gone: Callable[[], None] | None = None  # told when the socket went (registration lost)


class SocketSupervisor:
    """The one supervisor of kubelet plugin sockets, for the device plugin and the DRA
    plugin: a daemon thread that every ``interval`` seconds runs ``each_round`` (it returns
    False to end the loop). In a round, :meth:`keep_serving` serves a socket again when
    its file is gone or replaced (kubelet restarted, its directory re-created), with
    backoff while it cannot listen. A round's exception is logged; the loop goes on."""

    def __init__(
        self, each_round: Callable[[], bool], *, interval: float, name: str, log: logging.Logger
    ) -> None:
        self._round = each_round
        self._loop = LoopThread(name, self._step, interval=interval, logger=log)
        self._log = log

    def _step(self) -> None:
        if not self._round():
            self._loop.end()

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    @property
    def stopping(self) -> bool:
        return self._loop.stopping

    def keep_serving(self, w: Watched) -> bool:
        """Whether ``w`` serves now, serving it again if its socket went (False while its
        backoff runs or it cannot listen)."""
        if w.server.serving():
            return True
        if self._loop.stopping or not w.backoff.due():
            return False
        self._log.info("%s: socket gone or replaced (kubelet restarted?); serving again", w.what)
        if w.on_gone is not None:
            w.on_gone()
        try:
            w.server.serve()
        except OSError as e:  # the directory is not back yet, say: retry, quietly growing
            self._log.error("%s: %s; retry in %.1f s", w.what, e, w.backoff.fail())
            return False
        w.backoff.reset()
        return True
