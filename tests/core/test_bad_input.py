"""Bad files and flags as a user meets them: exit 2 and one line that names the file once
and the key, for every command that reads the file."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nfd.cli import build_parser

BINARY = bytes(range(128, 256)) * 4


def nfd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nfd", *args],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def one_line(p: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "internal error" not in lines[0] and "Traceback" not in p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _config_commands(path: str) -> list[list[str]]:
    return [
        ["discover", "--config", path],
        ["worker", "--oneshot", "--node-name", "n1", "--master", "http://127.0.0.1:9", "--config", path],
        ["master", "--no-publish", "--no-auth", "--config", path],
    ]


def test_a_binary_config_file_is_named(tmp_path: Path) -> None:
    f = tmp_path / "blob.conf"
    f.write_bytes(BINARY)
    commands = [
        *_config_commands(str(f)),
        ["device-plugin", "--check", "--config", str(f)],
        ["worker", "--oneshot", "--node-name", "n1", "--master", "http://127.0.0.1:9",
         "--device-plugin-config", str(f)],
    ]  # fmt: skip
    for argv in commands:
        line = one_line(nfd(*argv), str(f), "not UTF-8 text")
        assert line.count(str(f)) == 1, line


def test_a_binary_file_in_the_rules_dir_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("kind: NodeFeatureRule\n")
    (tmp_path / "b.yaml").write_bytes(BINARY)
    one_line(
        nfd("master", "--no-publish", "--no-auth", "--rules-dir", str(tmp_path)), str(tmp_path / "b.yaml")
    )


def test_a_bad_label_whitelist_names_the_key(tmp_path: Path) -> None:
    f = tmp_path / "nfd-worker.conf"
    f.write_text('core:\n  labelWhiteList: "(["\n')
    for argv in _config_commands(str(f)):
        one_line(nfd(*argv), str(f), "core.labelWhiteList", "not a valid regular expression")


def test_yaml_errors_name_the_file_once_with_the_reason(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("a: [1\nb: 2\n")
    commands = [*_config_commands(str(f)), ["device-plugin", "--check", "--config", str(f)]]
    for argv in commands:
        line = one_line(nfd(*argv), "not valid YAML: line 2, column 2:", "expected ',' or ']'")
        assert line.count(str(f)) == 1, line


def test_master_environment_errors_are_one_line() -> None:
    line = one_line(
        nfd("master", "--no-publish", "--no-auth", env={"NFD_MASTER_KUBE__QPS": "-1", "NFD_MASTER_SERVER__PORT": "x"}),
        "NFD_MASTER_KUBE__QPS", "NFD_MASTER_SERVER__PORT",
    )  # fmt: skip
    assert "NFD_MASTER_KUBE__QPS: -1: must be more than 0" in line
    one_line(
        nfd("master", "--no-publish", "--no-auth", env={"NFD_MASTER_KUBE": "{}"}),
        "NFD_MASTER_KUBE: set each key",
    )


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = nfd("master", "--no-publish", "--no-auth", "--host", "127.0.0.1", "--port", str(port))
    one_line(p, f"127.0.0.1:{port}", "in use")


def test_host_root_that_is_a_file_says_so(tmp_path: Path) -> None:
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0::/root:/bin/sh\n")
    one_line(nfd("discover", "--host-root", str(f)), f"--host-root {f}: not a directory")


def test_dropping_a_source_alone_means_all_but_it(fixtures: Path) -> None:
    host = str(fixtures / "hosts" / "this-vm")
    every = nfd("discover", "--host-root", host).stdout.splitlines()
    but_cpu = nfd("discover", "--host-root", host, "--sources=-cpu").stdout.splitlines()
    assert but_cpu and any("/cpu-" in x for x in every)
    assert but_cpu == [x for x in every if "/cpu-" not in x]


def _options(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.Action]]:
    out: list[tuple[str, argparse.Action]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _options(sub, f"{path} {name}")
        elif action.option_strings:
            out.append((path, action))
    return out


def test_every_flag_has_help() -> None:
    missing = [
        f"{path} {action.option_strings[0]}"
        for path, action in _options(build_parser(), "nfd")
        if not action.help or action.help == argparse.SUPPRESS
    ]
    assert missing == []


def test_the_readme_names_an_example_config_that_loads() -> None:
    from nfd.config import WorkerConfig
    from nfd.settings import load_model

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    example = root / "deploy" / "examples" / "nfd-worker.conf"
    assert "deploy/examples/nfd-worker.conf" in readme
    assert "does not replay the CPU" in readme
    cfg, warnings = load_model(example, WorkerConfig)
    assert warnings == [] and cfg.core.sleep_interval == 60.0


@pytest.mark.parametrize(
    ("argv", "env", "needle"),
    [
        (["--sleep-interval", "1ns"], {}, "--sleep-interval"),
        ([], {"NODE_NAME": "Bad_Name"}, "NODE_NAME"),
        (["--node-name", "a..b"], {}, "--node-name"),
        (["--ca-file", "/etc/passwd"], {}, "--ca-file /etc/passwd"),
    ],
)
def test_the_worker_checks_its_settings_at_start(argv: list[str], env: dict[str, str], needle: str) -> None:
    base = ["worker", "--oneshot", "--master", "https://127.0.0.1:9", "--port", "0"]
    if "NODE_NAME" not in env and "--node-name" not in argv:
        env = {**env, "NODE_NAME": "node-1"}
    one_line(nfd(*base, *argv, env=env), needle)
