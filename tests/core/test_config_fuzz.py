"""Property tests of the worker config file (``nfd worker --config``, ``nfd discover
--config``): whatever the file holds, loading it gives a config or a ConfigError of one
line that names the file once, and the key where a value is at fault."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from nfd.config import WorkerConfig
from nfd.features import Features
from nfd.labels import source_labels
from nfd.settings import ConfigError, load_model
from nfd.sources.custom import CustomSource
from tests.fuzzing import deeply_nested, dump, mutated, named_key, one_line_naming, raw_bytes

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "nfd-worker.conf"
VALID: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
VALID["sources"]["custom"] = [
    {"name": "r", "labels": {"x": "y"}, "matchFeatures": [{"feature": "cpu.cpuid", "matchExpressions": {"AVX": {"op": "Exists"}}}]}
]  # fmt: skip


NODE = Features(
    flags={"cpu.cpuid": {"AVX", "AVX2"}, "kernel.loadedmodule": {"ib_uverbs", "rdma_ucm"}},
    attributes={"cpu.model": {"family": "6", "vendor_id": "Intel"}},
    instances={"pci.device": [{"vendor": "15b3", "class": "0200"}]},
)


def check(path: Path) -> WorkerConfig | None:
    """The config, or None after checking the error's message."""
    try:
        config, warnings = load_model(path, WorkerConfig)
    except ConfigError as e:
        message = str(e)
        one_line_naming(message, str(path))
        assert message.startswith(f"config file {path}: "), message
        return None
    for w in warnings:
        one_line_naming(w, str(path))
    # What the worker does with it: its interval, its labels.
    assert math.isfinite(config.core.sleep_interval) and config.core.sleep_interval >= 0
    source_labels([], Features(), config)
    CustomSource().labels(NODE, config.sources)
    return config


@given(doc=mutated(VALID))
def test_a_config_of_the_right_shape_with_bad_values(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "nfd-worker.conf"
    path.write_text(dump(doc))
    try:
        load_model(path, WorkerConfig)
    except ConfigError as e:
        why = str(e).removeprefix(f"config file {path}: ")
        # A document that is not a mapping is "the file"; otherwise the key is named.
        assert why.startswith("the file: ") or named_key(why, doc), why
    check(path)


@given(data=raw_bytes)
def test_any_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "nfd-worker.conf"
    path.write_bytes(data)
    check(path)


def test_deep_nesting(tmp_path: Path) -> None:
    path = tmp_path / "nfd-worker.conf"
    for depth in (50, 900, 5000):
        path.write_text(f"core: {deeply_nested(depth)}\nsources: {{custom: [{deeply_nested(depth)}]}}\n")
        assert check(path) is None


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("core:\n  sleepInterval: 2001-13-45\n", "not valid YAML"),
        ("core:\n  sleepInterval: " + "9" * 5000 + "\n", "not valid YAML"),
        ('core:\n  labelWhiteList: "a{99999999999}"\n', "core.labelWhiteList"),
        ("core:\n  sleepInterval: .inf\n", "core.sleepInterval"),
        ("core:\n  sleepInterval: 99999999999h\n", "core.sleepInterval"),
    ],
)
def test_the_commands_say_it_in_one_line(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "nfd-worker.conf"
    path.write_text(text)
    for command in (
        ["discover"],
        ["worker", "--oneshot", "--node-name", "n1", "--master", "http://127.0.0.1:9"],
    ):
        p = subprocess.run(
            [sys.executable, "-m", "nfd", *command, "--config", str(path)],
            capture_output=True, text=True, timeout=60, env={**os.environ, "NFD_DEBUG": ""},
        )  # fmt: skip
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1, p.stderr
        assert lines[0].startswith(f"nfd {command[0]}: error: config file {path}: "), lines[0]
        assert needle in lines[0] and "Traceback" not in p.stderr, lines[0]
        one_line_naming(lines[0], str(path))


@given(interval=st.one_of(st.floats(), st.integers(min_value=-(2**70), max_value=2**70)))
def test_any_number_as_the_interval(tmp_path: Path, interval: float) -> None:
    path = tmp_path / "nfd-worker.conf"
    path.write_text(dump({"core": {"sleepInterval": interval}}))
    check(path)
