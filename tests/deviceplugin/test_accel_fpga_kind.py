"""The fpga device kind over the Arria 10 and Alveo fixture trees."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from nfd.devices.config import parse_config
from nfd.devices.inventory import ResourceState, build_states
from nfd.devices.kinds import KindRegistry, default_kinds
from nfd.devices.kinds.fpga import FpgaKind
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.settings import ConfigError

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def states(resources: list[dict[str, Any]], root: Path) -> list[ResourceState]:
    cfg = parse_config({"resources": resources}, KindRegistry((FpgaKind(),)))
    got, _ = build_states(cfg.resources, features=Features(), host=HostRoot.under(root))
    return got


def test_intel_pac_gets_its_dfl_port() -> None:
    (pac,) = states(
        [{"name": "fpga.intel.com/arria10", "fpga": {"vendor": "intel", "device": "09c4"}}],
        HOSTS / "fpga-arria10",
    )
    assert pac.physical_ids == ["0000:3b:00.0"]
    edits = pac.allocate(["0000:3b:00.0"])
    assert [n.host_path for n in edits.devices] == ["/dev/dfl-port.0"]
    (fme,) = states(
        [{"name": "fpga.intel.com/fme", "fpga": {"vendor": "intel", "fme": True}}], HOSTS / "fpga-arria10"
    )
    assert [n.host_path for _, d in fme.devices() for n in d.device_nodes] == [
        "/dev/dfl-fme.0",
        "/dev/dfl-port.0",
    ]


def test_alveo_user_function_and_templates(tmp_path: Path) -> None:
    root = tmp_path / "host"
    shutil.copytree(HOSTS / "fpga-alveo", root, symlinks=True)
    resources = [
        {
            "name": "xilinx.com/fpga-u250",
            "fpga": {"vendor": "xilinx", "driver": "xocl"},
            "env": {"XILINX_DEVICE": "{address}"},
        }
    ]
    (u250,) = states(resources, root)
    assert u250.physical_ids == ["0000:af:00.1"]
    assert u250.snapshot()[1][0].numa_node == 1
    edits = u250.allocate(["0000:af:00.1"])
    assert [n.host_path for n in edits.devices] == ["/dev/dri/renderD129"]
    assert edits.envs == {"XILINX_DEVICE": "0000:af:00.1"}
    driver = root / "sys/bus/pci/devices/0000:af:00.1/driver"
    driver.unlink()
    u250.refresh()
    assert u250.reasons() == ["driver xocl unbound"]
    driver.symlink_to("../../../../bus/pci/drivers/vfio-pci")
    u250.refresh()
    assert u250.reasons() == ["driver changed from xocl to vfio-pci"]
    shutil.rmtree(root / "sys/bus/pci/devices/0000:af:00.1")
    u250.refresh()
    assert u250.reasons() == ["PCI device gone from sysfs"]


def test_the_amd_gpu_next_to_it_is_not_an_fpga() -> None:
    (anything,) = states([{"name": "example.com/fpga", "fpga": {"vendor": "xilinx"}}], HOSTS / "fpga-alveo")
    assert anything.physical_ids == ["0000:af:00.0", "0000:af:00.1"]


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"vendor": "lattice"}, "vendor: required"),
        ({"vendor": "intel", "fme": "yes"}, "fme"),
        ({"vendor": "intel", "device": 9}, "quote"),
    ],
)
def test_selector_errors(selector: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(
            {"resources": [{"name": "example.com/fpga", "fpga": selector}]}, KindRegistry((FpgaKind(),))
        )


def test_default_kinds_know_gpu_and_fpga() -> None:
    names = default_kinds().names()
    assert "gpu" in names and "fpga" in names
