from pathlib import Path

from nfd.hostroot import HostRoot


def test_default_is_slash() -> None:
    h = HostRoot()
    assert h.sys == Path("/sys") and h.usr_lib == Path("/usr/lib")


def test_under_a_tree() -> None:
    h = HostRoot.under("/t")
    assert h.proc == Path("/t/proc") and h.usr_lib == Path("/t/usr/lib") and h.etc == Path("/t/etc")


def test_prefix_as_upstream_mounts() -> None:
    h = HostRoot.from_env({"NFD_HOST_PREFIX": "/host-"})
    assert h.sys == Path("/host-sys")
    assert h.usr_lib == Path("/host-usr/lib")
    assert h.boot == Path("/host-boot")


def test_per_part_override_wins() -> None:
    h = HostRoot.from_env({"NFD_HOST_ROOT": "/r", "NFD_HOST_SYS": "/elsewhere/sys"})
    assert h.sys == Path("/elsewhere/sys")
    assert h.proc == Path("/r/proc")


def test_empty_environment_is_slash() -> None:
    assert HostRoot.from_env({}) == HostRoot()
