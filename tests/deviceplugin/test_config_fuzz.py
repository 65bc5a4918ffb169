"""Property tests of the device config file (``nfd device-plugin --config``, ``nfd dra
--config``): whatever it holds, it loads or is a ConfigError of one line that names
the file once and the key at fault."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from nfd.devices.config import load_config
from nfd.settings import ConfigError
from tests.fuzzing import dump, mutated, named_key, one_line_naming, raw_bytes

VALID: dict[str, Any] = {
    "resources": [
        {
            "name": "example.com/fpga",
            "pci": {"vendor": ["1172", "0x10DE"], "class": "12", "driver": "vfio-pci", "address": "0000:3b:*"},
            "deviceNodes": ["/dev/vfio/{iommu_group}", {"path": "/dev/dri/card0", "containerPath": "/dev/card", "permissions": "rw"}],
            "mounts": [{"hostPath": "/opt/x", "containerPath": "/x", "readOnly": True}],
            "env": {"FPGA_ADDRESSES": "{address}"},
            "replicas": 2,
            "cdi": True,
        },
        {"name": "example.com/serial", "usb": {"vendor": "0403", "product": "6001"}, "cdi": {"kind": "example.com/serial"}},
        {"name": "example.com/gpu", "gpu": {"vendor": "nvidia"}, "servedBy": "dra", "extendedResourceName": False},
        {"name": "example.com/dev", "devnode": "/dev/x"},
    ],
    "dra": {"driverName": "nfd.node.kubernetes.io"},
}  # fmt: skip


def check(path: Path) -> None:
    try:
        load_config(path)
    except ConfigError as e:
        one_line_naming(str(e), str(path))
        assert str(e).startswith(f"config file {path}: "), str(e)


@given(doc=mutated(VALID))
def test_a_config_of_the_right_shape_with_bad_values(tmp_path: Path, doc: Any) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text(dump(doc))
    check(path)
    try:
        load_config(path)
    except ConfigError as e:
        why = str(e).removeprefix(f"config file {path}: ")
        # The key at fault, or the top-level key that is no string, or a file that is no mapping.
        assert named_key(why, doc) or why.startswith("the key ") or not isinstance(doc, dict), why


@given(data=raw_bytes)
def test_any_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "devices.yaml"
    path.write_bytes(data)
    check(path)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("resources:\n- name: example.com/x\n  devnode: /dev/x\n  replicas: 2001-13-45\n", "not valid YAML"),
        ("resources:\n- name: example.com/x\n  devnode: /dev/x\n  replicas: .inf\n", "resources[0].replicas"),
        (
            "resources:\n- name: example.com/x\n  pci: {vendor: 0x" + "f" * 5000 + "}\n",
            "resources[0].pci.vendor",
        ),
    ],
)
@pytest.mark.parametrize("command", ["device-plugin", "dra"])
def test_the_commands_say_it_in_one_line(tmp_path: Path, text: str, needle: str, command: str) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text(text)
    p = subprocess.run(
        [sys.executable, "-m", "nfd", command, "--check", "--config", str(path)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "NFD_DEBUG": ""},
    )  # fmt: skip
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"nfd {command}: error: config file {path}: "), lines[0]
    assert needle in lines[0], lines[0]
    one_line_naming(lines[0], str(path))
