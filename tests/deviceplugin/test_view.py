from __future__ import annotations

import json
from pathlib import Path

import yaml
from fixtures import FixtureHost

from nfd.deviceplugin import served_resources
from nfd.deviceplugin.cdi import write_spec
from nfd.deviceplugin.config import parse_config
from nfd.deviceplugin.model import DeviceNode, FoundDevice


def test_served_resources_are_those_with_devices(fx: FixtureHost, tmp_path: Path) -> None:
    data = {
        "resources": [
            {"name": "example.com/tty", "devnode": "/dev/ttyS*"},
            {"name": "example.com/absent", "pci": {"vendor": "dead"}, "deviceNodes": ["/dev/x"]},
            {"name": "example.com/fpga", "pci": {"class": "12"}, "deviceNodes": ["/dev/vfio/{iommu_group}"]},
        ]
    }
    assert served_resources(parse_config(data), features=fx.features(), host=fx.host) == [
        "example.com/fpga",
        "example.com/tty",
    ]
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(data))
    assert served_resources(path, features=fx.features(), host=fx.host) == [
        "example.com/fpga",
        "example.com/tty",
    ]


def test_cdi_spec_written_atomically_and_replaced(tmp_path: Path) -> None:
    dev = FoundDevice(id="0000:3b:00.0", device_nodes=(DeviceNode("/dev/a", "/dev/a"),))
    p1 = write_spec(tmp_path, "example.com/x", [("0000:3b:00.0", dev)])
    first = json.loads(p1.read_text())
    assert first["devices"][0]["name"] == "0000:3b:00.0"
    p2 = write_spec(tmp_path, "example.com/x", [("0000:3b:00.0", dev), ("0000:3c:00.0", dev)], "0.5.0")
    assert p1 == p2 and [f.name for f in tmp_path.iterdir()] == ["nfd-example.com-x.json"]
    second = json.loads(p2.read_text())
    assert second["cdiVersion"] == "0.5.0" and len(second["devices"]) == 2
    # Devices with nothing to inject are left out: CDI refuses empty edits.
    p3 = write_spec(tmp_path, "example.com/x", [("a", FoundDevice(id="a"))])
    assert json.loads(p3.read_text())["devices"] == []
