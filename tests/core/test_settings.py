"""The one settings mechanism (nfd/settings.py): a model read from a file or the
environment, and every binary's bad value as one line naming the file and the key."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nfd.settings import ConfigError, from_environment, from_mapping, load_model


@dataclass(frozen=True)
class Inner:
    rate: float = field(default=1.0, metadata={"gt": 0})
    mode: str = "fast"

    def __post_init__(self) -> None:
        if self.mode not in ("fast", "slow"):
            raise ConfigError(f"{self.mode!r} is not fast or slow", "mode")


@dataclass(frozen=True)
class Outer:
    white_list: str = field(default="", metadata={"key": "whiteList"})
    count: int = field(default=1, metadata={"ge": 1})
    names: tuple[str, ...] = ()
    path: Path | None = field(default=None, metadata={"type": Path})
    inner: Inner = field(default_factory=Inner)


def test_keys_are_camel_case_and_values_take_the_fields_types() -> None:
    warnings: list[str] = []
    got = from_mapping(
        Outer,
        {
            "whiteList": "^a",
            "count": 3,
            "names": ["x", 7],
            "path": "/etc/x",
            "inner": {"rate": "2m"},
            "klog": {},
        },
        warnings=warnings,
    )
    assert got == Outer("^a", 3, ("x", "7"), Path("/etc/x"), Inner(rate=120.0))
    assert warnings == ["unknown key 'klog' ignored"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"count": 0}, "count: 0: must be at least 1"),
        ({"inner": {"rate": 0}}, "inner.rate: 0: must be more than 0"),
        ({"inner": {"mode": "warp"}}, "inner.mode: 'warp' is not fast or slow"),
        ({"inner": []}, "inner: expected a mapping, got list"),
        ({"names": "x"}, "names: expected a list"),
        ({"names": [["x"]]}, "names[0]: expected a string"),
    ],
)
def test_a_bad_value_names_its_key_path(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_mapping(Outer, data, warnings=[])
    assert str(e.value) == message


def test_a_file_error_names_the_file_then_the_key(tmp_path: Path) -> None:
    conf = tmp_path / "outer.conf"
    conf.write_text("inner:\n  mode: warp\n")
    with pytest.raises(ConfigError) as e:
        load_model(conf, Outer)
    assert str(e.value) == f"config file {conf}: inner.mode: 'warp' is not fast or slow"


@dataclass
class Groups:
    inner: Inner = field(default_factory=Inner)
    outer: Outer = field(default_factory=Outer)


def test_the_environment_sets_a_groups_keys() -> None:
    env = {"APP_INNER__RATE": "0.5", "APP_OUTER__NAMES": '["a", "b"]', "APP_URL": "elsewhere's", "HOME": "/"}
    got = from_environment(Groups, "APP_", env)
    assert got == Groups(Inner(rate=0.5), Outer(names=("a", "b")))


def test_every_bad_variable_is_named_on_one_line() -> None:
    env = {"APP_INNER__RATE": "-1", "APP_OUTER__COUNT": "many", "APP_OUTER__NOPE": "1", "APP_INNER": "{}"}
    with pytest.raises(ConfigError) as e:
        from_environment(Groups, "APP_", env)
    assert str(e.value) == (
        "environment: APP_INNER: set each key on its own (APP_INNER__<KEY>); "
        "APP_INNER__RATE: -1: must be more than 0; "
        "APP_OUTER__COUNT: expected a whole number; APP_OUTER__NOPE: unknown setting"
    )


# Each binary with a config file, and a value it refuses at a key path.
BINARIES = [
    (["discover"], "core:\n  sleepInterval: soon\n", "core.sleepInterval: 'soon' is not a duration"),
    (
        ["worker", "--oneshot", "--node-name", "n1", "--master", "http://127.0.0.1:9"],
        "sources:\n  gpu:\n    migStrategy: half\n",
        "sources.gpu.migStrategy: 'half' is not one of none, single, mixed",
    ),
    (
        ["master", "--no-publish", "--no-auth"],
        "nfdApiParallelism: 0\n",
        "nfdApiParallelism: 0: must be at least 1",
    ),
    (
        ["master", "--no-publish", "--no-auth"],
        "core:\n  noPublish: maybe\n",
        "core.noPublish: expected true or false",
    ),
    (
        ["device-plugin", "--check"],
        "resources:\n  - name: example.com/tty\n    devnode: /dev/tty*\n    replicas: 0\n",
        "resources[0].replicas: ",
    ),
    (
        ["dra", "--check", "--node-name", "n1"],
        "resources: []\ndra:\n  taintEffect: Sometimes\n",
        "dra.taintEffect: ",
    ),
    (
        ["topology-updater", "--no-publish", "--oneshot", "--node-name", "n1"],
        "excludeList:\n  n1: memory\n",
        "excludeList.n1: expected a list of resource names",
    ),
]


@pytest.mark.parametrize(
    ("argv", "text", "message"), BINARIES, ids=lambda v: v[0] if isinstance(v, list) else ""
)
def test_each_binary_says_file_and_key_in_one_line(
    tmp_path: Path, argv: list[str], text: str, message: str
) -> None:
    conf = tmp_path / "the.conf"
    conf.write_text(text)
    p = subprocess.run(
        [sys.executable, "-m", "nfd", *argv, "--config", str(conf)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "NFD_DEBUG": ""},
    )  # fmt: skip
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"nfd {argv[0]}: error: config file {conf}: {message}"), lines[0]
