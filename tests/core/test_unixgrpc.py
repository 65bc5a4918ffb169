"""unixgrpc's clean-up of sockets a killed process left: only a socket nobody listens
on goes; a live one, a regular file and a missing path stay as they are."""

from __future__ import annotations

import socket
from pathlib import Path

from nfd.unixgrpc import remove_stale


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
