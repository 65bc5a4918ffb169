"""unixgrpc: the clean-up of sockets a killed process left (only a socket nobody listens
on goes; a live one, a regular file and a missing path stay as they are), and the
supervisor's serving again of a socket that went, with backoff."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

from nfd.backoff import Backoff
from nfd.unixgrpc import SocketSupervisor, Watched, remove_stale


def test_only_sockets_nobody_listens_on_are_removed(tmp_path: Path) -> None:
    dead, live, plain = tmp_path / "dead.sock", tmp_path / "live.sock", tmp_path / "plain.sock"
    with socket.socket(socket.AF_UNIX) as d, socket.socket(socket.AF_UNIX) as lv:
        d.bind(str(dead))  # bound, never listening: what a killed process leaves
        lv.bind(str(live))
        lv.listen(1)
        plain.write_text("not a socket\n")
        removed = remove_stale([str(dead), str(live), str(plain), str(tmp_path / "missing.sock")])
        assert removed == [str(dead)]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["live.sock", "plain.sock"]


class Flaky:
    """A server whose socket went; it cannot listen while ``down``."""

    def __init__(self) -> None:
        self.up = False
        self.down = True
        self.serves = 0

    def serve(self) -> None:
        self.serves += 1
        if self.down:
            raise OSError("cannot listen: no such directory")
        self.up = True

    def serving(self) -> bool:
        return self.up


def test_the_supervisor_serves_a_gone_socket_again_with_backoff() -> None:
    now = [0.0]
    gone: list[str] = []
    server = Flaky()
    w = Watched(
        server, "r", Backoff(initial=1.0, cap=4.0, jitter=0, clock=lambda: now[0]), lambda: gone.append("r")
    )
    sup = SocketSupervisor(lambda: True, interval=0.1, name="t", log=logging.getLogger("t"))
    assert not sup.keep_serving(w) and server.serves == 1
    assert not sup.keep_serving(w) and server.serves == 1  # within its backoff: not tried
    now[0] = 1.0
    assert not sup.keep_serving(w) and server.serves == 2
    now[0] = 2.5  # the second wait is 2 s
    assert not sup.keep_serving(w) and server.serves == 2
    server.down = False
    now[0] = 3.0
    assert sup.keep_serving(w) and server.serves == 3 and w.backoff.failures == 0
    assert sup.keep_serving(w) and server.serves == 3  # serving: nothing to do
    assert gone == ["r", "r", "r"]  # told at each try (its registration is lost)
