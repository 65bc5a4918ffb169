import os
from pathlib import Path

from nfd.hostroot import HostPath, HostRoot


def test_default_is_slash() -> None:
    h = HostRoot()
    assert h.sys == "/sys" and h.usr_lib == "/usr/lib"


def test_under_a_tree() -> None:
    h = HostRoot.under("/t")
    assert h.proc == "/t/proc" and h.usr_lib == "/t/usr/lib" and h.etc == "/t/etc"


def test_under_a_path_with_a_trailing_slash() -> None:
    assert HostRoot.under(Path("/t")).sys == HostRoot.under("/t/").sys == "/t/sys"


def test_prefix_as_upstream_mounts() -> None:
    h = HostRoot.from_env({"NFD_HOST_PREFIX": "/host-"})
    assert h.sys == "/host-sys"
    assert h.usr_lib == "/host-usr/lib"
    assert h.boot == "/host-boot"


def test_per_part_override_wins() -> None:
    h = HostRoot.from_env({"NFD_HOST_ROOT": "/r", "NFD_HOST_SYS": "/elsewhere/sys/"})
    assert h.sys == "/elsewhere/sys"
    assert h.proc == "/r/proc"


def test_empty_environment_is_slash() -> None:
    assert HostRoot.from_env({}) == HostRoot()


def test_parts_given_as_paths_are_kept_as_host_paths() -> None:
    h = HostRoot(sys=Path("/x/sys"), proc="/x/proc")  # type: ignore[arg-type]
    assert type(h.sys) is HostPath and type(h.proc) is HostPath
    assert h == HostRoot(sys=HostPath("/x/sys"), proc=HostPath("/x/proc"))


def test_host_path_joins_as_a_path_does() -> None:
    p = HostPath("/sys")
    for rel in ("class", "bus/pci/devices", "/abs/elsewhere", "a/b/"):
        joined = p / rel
        assert type(joined) is HostPath
        assert joined == str(Path("/sys") / rel) or rel.endswith("/")
    assert HostPath("/") / "sys" == "/sys"
    assert (p / "class" / "net").name == "net"
    assert (p / "class" / "net").parent == "/sys/class"
    assert HostPath("/usr/lib").parent == "/usr"


def test_host_path_checks_the_filesystem(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    base = HostPath(str(tmp_path))
    assert (base / "d").is_dir() and not (base / "d").is_file()
    assert (base / "f").is_file() and (base / "f").exists()
    assert not (base / "missing").exists()
    assert os.fspath(base / "f") == str(tmp_path / "f")
    assert Path(base / "f").read_text() == "x"
