from __future__ import annotations

import json
from pathlib import Path

import yaml
from cdi_check import problems as cdi_problems
from fixtures import FixtureHost

from nfd.deviceplugin import declared_resources, served_resources
from nfd.devices.cdi import write_spec
from nfd.devices.config import parse_config
from nfd.devices.kinds.model import DeviceNode, FoundDevice


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
    assert declared_resources(path) == ["example.com/absent", "example.com/fpga", "example.com/tty"]


def test_cdi_checker_catches_what_loaders_refuse() -> None:
    good = {
        "cdiVersion": "1.0.0",
        "kind": "example.com/x",
        "devices": [{"name": "a", "containerEdits": {"env": ["A=1"]}}],
    }
    assert cdi_problems(good) == []
    bad = {
        "cdiVersion": "1.0.0",
        "kind": "example.com/x",
        "extra": 1,
        "devices": [
            {"name": "-a", "containerEdits": {}},
            {"name": "b", "containerEdits": {"deviceNodes": [{"hostPath": "/dev/x", "perms": "r"}]}},
        ],
    }
    got = cdi_problems(bad)
    assert "spec.extra: unknown field" in got
    assert "devices[0].name: invalid" in got and "devices[0].containerEdits: empty container edits" in got
    assert "devices[1].containerEdits.deviceNodes[0].perms: unknown field" in got
    assert "devices[1].containerEdits.deviceNodes[0].path: required, absolute" in got


def test_cdi_spec_with_kind_edits_is_valid(tmp_path: Path) -> None:
    from nfd.devices.kinds.model import CdiEdits, CdiHook, Mount

    dev = FoundDevice(
        id="GPU-0",
        device_nodes=(DeviceNode("/dev/nvidia0", "/dev/nvidia0", "rw"),),
        mounts=(Mount("/usr/lib/x.so", "/usr/lib/x.so"),),
        cdi=CdiEdits(env=("A=1",), hooks=(CdiHook("createContainer", "/usr/bin/hook", ("hook", "ldcache")),)),
    )
    spec = json.loads(write_spec(tmp_path, "example.com/gpu", [("GPU-0", dev)]).read_text())
    assert cdi_problems(spec) == []
    edits = spec["devices"][0]["containerEdits"]
    assert edits["env"] == ["A=1"]
    assert edits["hooks"] == [
        {"hookName": "createContainer", "path": "/usr/bin/hook", "args": ["hook", "ldcache"]}
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


def test_cdi_spec_env_for_every_device_comes_before_the_devices_own() -> None:
    # A DRA claim's devices share one container: the claim's joined variables go in each
    # device's edits, ahead of what the kind adds; a device with only env is not empty.
    from nfd.devices.cdi import build_spec
    from nfd.devices.kinds.model import CdiEdits

    gpu = FoundDevice(id="g", device_nodes=(DeviceNode("/dev/g", "/dev/g"),), cdi=CdiEdits(env=("A=1",)))
    bare = FoundDevice(id="b")
    spec = build_spec("example.com/x", [("g", gpu), ("b", bare)], env=["P=a,b"])
    assert cdi_problems(spec) == []
    assert [(d["name"], d["containerEdits"]["env"]) for d in spec["devices"]] == [
        ("g", ["P=a,b", "A=1"]),
        ("b", ["P=a,b"]),
    ]
    [plain] = build_spec("example.com/x", [("g", FoundDevice(id="g", device_nodes=gpu.device_nodes))])[
        "devices"
    ]
    assert "env" not in plain["containerEdits"]
