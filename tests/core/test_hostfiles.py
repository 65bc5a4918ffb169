"""The one host-file reader: never blocks, bounded, and a bad value costs that value."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from nfd import hostfiles
from nfd.hostroot import HostRoot


def finishes(fn, *args, within=5.0):
    """fn(*args) in a thread; its result, failing the test if it blocks."""
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    t.join(within)
    assert not t.is_alive(), f"{fn.__name__} blocked"
    return out[0]


def test_device_dirs_are_paths_in_name_order_and_none_when_absent(tmp_path: Path) -> None:
    for name in ("sdb", "nvme0n1", "sda"):
        (tmp_path / "block" / name).mkdir(parents=True)
    base = tmp_path / "block"
    assert hostfiles.device_dirs(base) == [f"{base}/nvme0n1", f"{base}/sda", f"{base}/sdb"]
    assert hostfiles.device_dirs(tmp_path / "absent") is None


def test_attrs_keeps_what_is_there_by_its_last_component(tmp_path: Path) -> None:
    (tmp_path / "queue").mkdir()
    (tmp_path / "queue" / "rotational").write_text("0\n")
    (tmp_path / "size").write_text("")
    got = hostfiles.attrs(tmp_path, ("queue/dax", "queue/rotational", "size"))
    assert got == {"rotational": "0", "size": ""}


@pytest.mark.parametrize(
    "read", [hostfiles.read_bytes, hostfiles.read_text, hostfiles.read_line, hostfiles.attr]
)
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, read, caplog) -> None:
    fifo = tmp_path / "numa_node"
    os.mkfifo(fifo)
    assert finishes(read, str(fifo)) is None
    # With a writer holding it open and writing nothing, too.
    w = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    try:
        assert finishes(read, str(fifo)) is None
    finally:
        os.close(w)
    assert "not a regular file" in caplog.text


def test_directories_and_devices_are_not_values(tmp_path: Path) -> None:
    assert hostfiles.read_line(str(tmp_path)) is None
    assert finishes(hostfiles.attr, "/dev/zero") is None  # would read forever unbounded


def test_reads_are_bounded_and_over_the_bound_costs_the_value(tmp_path: Path, caplog) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"1" * hostfiles.PAGE)
    assert hostfiles.attr(str(f)) == "1" * hostfiles.PAGE
    f.write_bytes(b"1" * (hostfiles.PAGE + 1))
    assert hostfiles.attr(str(f)) is None
    assert f"more than {hostfiles.PAGE} bytes" in caplog.text
    assert hostfiles.read_line(str(f)) == "1" * (hostfiles.PAGE + 1)
    assert hostfiles.read_bytes(str(f), limit=100) is None
    f.write_bytes(b"x" * (hostfiles.MAX_BYTES + 1))
    assert hostfiles.read_bytes(str(f)) is None
    f.write_bytes(b"x" * hostfiles.MAX_BYTES)
    assert hostfiles.read_bytes(str(f)) == b"x" * hostfiles.MAX_BYTES


def test_nul_inside_text_costs_the_value_trailing_nul_is_padding(tmp_path: Path, caplog) -> None:
    f = tmp_path / "osrelease"
    f.write_bytes(b"5.15.0-1\x00x\n")
    assert hostfiles.attr(str(f)) is None and hostfiles.read_text(str(f)) is None
    assert "NUL" in caplog.text
    f.write_bytes(b"Vendor\x00\x00\x00")
    assert hostfiles.attr(str(f)) == "Vendor"
    assert hostfiles.read_bytes(str(f)) == b"Vendor\x00\x00\x00"  # bytes are bytes
    # A path built from such a value is absent, not an error.
    assert hostfiles.read_bytes(str(tmp_path / "a\x00b")) is None
    assert hostfiles.entries(str(tmp_path / "a\x00b")) is None
    assert hostfiles.link_name(str(tmp_path / "a\x00b")) is None


def test_control_characters_in_paths_are_escaped_in_messages(tmp_path: Path, caplog) -> None:
    d = tmp_path / "evil\x1b[2J"
    d.mkdir()
    os.mkfifo(d / "f")
    caplog.set_level(logging.WARNING)
    assert hostfiles.read_line(str(d / "f")) is None
    assert "\x1b" not in caplog.text and "evil\\x1b[2J" in caplog.text


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("42", 42), ("-1", -1), ("+3", 3), ("9" * 19, int("9" * 19)), ("9" * 20, None),
     ("9" * 4_000_000, None), ("", None), ("1.5", None), ("0x10", None), ("١٢", None), (None, None)],
)  # fmt: skip
def test_int_value(text, value) -> None:
    assert hostfiles.int_value(text) == value


@pytest.mark.parametrize(("text", "node"), [("0", 0), ("3", 3), ("-1", None), ("x", None), ("1" * 40, None)])
def test_numa_node(text, node) -> None:
    assert hostfiles.numa_node(text) == node


# -- links inside the host root --------------------------------------------------------


def tree(root: Path) -> None:
    (root / "etc").mkdir(parents=True)
    (root / "usr/lib").mkdir(parents=True)
    (root / "usr/lib/os-release").write_text("ID=host\n")
    os.symlink("/usr/lib/os-release", root / "etc/os-release")
    os.symlink("../usr/lib/os-release", root / "etc/relative")
    os.symlink("loop", root / "etc/loop")
    os.symlink("/home/user/x", root / "etc/outside")
    os.symlink("/usr/lib", root / "etc/libdir")


def test_absolute_links_resolve_inside_the_host_root(tmp_path: Path) -> None:
    tree(tmp_path)
    h = HostRoot.under(tmp_path)
    want = str(tmp_path / "usr/lib/os-release")
    assert h.resolve(h.etc / "os-release") == want
    assert h.resolve(h.etc / "relative") == want
    assert h.resolve(h.etc / "libdir/os-release") == want
    assert h.resolve(h.etc / "plain") == str(tmp_path / "etc/plain")  # absent: still a path
    assert h.resolve(h.etc / "loop") is None
    assert h.resolve(h.etc / "outside") is None  # the host's /home is not mounted here
    assert h.resolve("/somewhere/else") == "/somewhere/else"  # not a host path


def test_links_resolve_across_prefix_mounts(tmp_path: Path) -> None:
    """Upstream's DaemonSet mounts /etc at /host-etc and /usr/lib at /host-usr/lib: a
    link climbing out of /host-etc lands in /host-usr/lib, not the container's /usr."""
    (tmp_path / "host-etc").mkdir()
    (tmp_path / "host-usr/lib").mkdir(parents=True)
    (tmp_path / "host-usr/lib/os-release").write_text("ID=host\n")
    os.symlink("../usr/lib/os-release", tmp_path / "host-etc/os-release")
    os.symlink("/usr/lib/os-release", tmp_path / "host-etc/absolute")
    h = HostRoot.from_env({"NFD_HOST_PREFIX": f"{tmp_path}/host-"})
    want = str(tmp_path / "host-usr/lib/os-release")
    assert h.resolve(h.etc / "os-release") == want
    assert h.resolve(h.etc / "absolute") == want


def test_on_the_host_itself_links_are_left_to_the_kernel() -> None:
    assert HostRoot().resolve("/etc/os-release") == "/etc/os-release"
