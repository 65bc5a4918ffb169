"""``nfd device-plugin`` as a user runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fixtures import FixtureHost
from kubelet_standin import KubeletStandIn, wait_for

ROOT = Path(__file__).resolve().parents[2]


def nfd(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "nfd", *args], capture_output=True, text=True, env=env, timeout=60, **kw
    )  # type: ignore[call-overload]


@pytest.fixture
def setup(fx: FixtureHost, tmp_path: Path) -> tuple[Path, list[str]]:
    feats = tmp_path / "features.json"
    feats.write_text(fx.features().to_json())
    return tmp_path / "dp.yaml", ["--features", str(feats), "--host-root", str(fx.root)]


def write(path: Path, data: object) -> str:
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return str(path)


@pytest.mark.parametrize(
    ("config", "expect"),
    [
        (
            {"resources": [{"name": "example.com/x", "pci": {"vendr": "8086"}}]},
            "resources[0].pci.vendr: unknown selector key",
        ),
        ({"resources": [{"name": "fpga", "devnode": "/dev/x"}]}, "resources[0].name: invalid resource name"),
        ("resources:\n  - name: example.com/x\n    pci: {vendor: 8086}\n", "quote hex IDs"),
        ("resources: [", "not valid YAML"),
    ],
)
def test_bad_config_is_one_line_exit_2(setup: tuple[Path, list[str]], config: object, expect: str) -> None:
    cfg, extra = setup
    p = nfd("device-plugin", "--config", write(cfg, config), "--check", *extra)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfd device-plugin: error: config ")
    assert expect in lines[0]
    assert "Traceback" not in p.stderr


def test_missing_config_file(tmp_path: Path) -> None:
    p = nfd("device-plugin", "--config", str(tmp_path / "nope.yaml"), "--check")
    assert (
        p.returncode == 2
        and "nope.yaml: no such file" in p.stderr
        and len(p.stderr.strip().splitlines()) == 1
    )


def test_check_prints_devices_and_warns_on_empty_glob(setup: tuple[Path, list[str]], fx: FixtureHost) -> None:
    cfg, extra = setup
    fx.unbind("0000:b0:00.0")
    config = {
        "resources": [
            {
                "name": "example.com/fpga",
                "pci": {"vendor": "1172", "class": "12"},
                "deviceNodes": ["/dev/vfio/{iommu_group}"],
            },
            {"name": "example.com/tty", "devnode": ["/dev/ttyS*", "/dev/ttyACM*"]},
            {"name": "example.com/none", "usb": {"vendor": "dead"}},
        ]
    }
    p = nfd("device-plugin", "--config", write(cfg, config), "--check", *extra)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "example.com/fpga: 4 device(s), 3 of 4 allocatable" in out
    assert "  0000:af:00.0  Healthy  numa=1  nodes=/dev/vfio/40" in out
    assert "  0000:b0:00.0  Unhealthy (driver vfio-pci unbound)  numa=1" in out
    assert "example.com/tty: 4 device(s)" in out and "  ttyS3  Healthy  numa=-  nodes=/dev/ttyS3" in out
    assert "example.com/none: 0 device(s)" in out
    assert "warning: resources[1].devnode: /dev/ttyACM* matches no device node" in p.stderr
    assert (
        "warning: resources[2]: example.com/none: no device matches usb vendor=dead; not served" in p.stderr
    )


def test_check_without_iommu_group_shows_no_half_vfio_path(
    setup: tuple[Path, list[str]], fx: FixtureHost, tmp_path: Path
) -> None:
    cfg, _extra = setup
    # Discovery without IOMMU (intel_iommu=off): no iommu_group in the features nor sysfs.
    feats = fx.features()
    feats.set_instances("pci.device", [{**i, "iommu_group": ""} for i in feats.instances["pci.device"]])
    path = tmp_path / "no-iommu.json"
    path.write_text(feats.to_json())
    config = {
        "resources": [
            {
                "name": "example.com/fpga",
                "pci": {"vendor": "1172"},
                "deviceNodes": ["/dev/vfio/{iommu_group}", "/dev/vfio/vfio"],
            }
        ]
    }
    p = nfd("device-plugin", "--config", write(cfg, config), "--check", "--features", str(path),
            "--host-root", str(fx.root))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "/dev/vfio/ " not in p.stdout and "/dev/vfio/," not in p.stdout
    assert "example.com/fpga: 4 device(s), 0 of 4 allocatable" in p.stdout
    assert "  0000:3b:00.0  Unhealthy (/dev/vfio/{iommu_group}: no iommu_group for this device)" in p.stdout
    assert "nodes=/dev/vfio/vfio" in p.stdout


def test_check_counts_only_healthy_devices_as_allocatable(
    setup: tuple[Path, list[str]], fx: FixtureHost
) -> None:
    cfg, extra = setup
    for addr in ("0000:3b:00.0", "0000:3c:00.0", "0000:af:00.0"):
        fx.unbind(addr)
    config = {"resources": [{"name": "example.com/fpga", "pci": {"vendor": "1172"}, "replicas": 2}]}
    p = nfd("device-plugin", "--config", write(cfg, config), "--check", *extra)
    assert p.returncode == 0, p.stderr
    assert "example.com/fpga: 4 device(s), 2 of 8 allocatable" in p.stdout
    fx.unbind("0000:b0:00.0")
    p = nfd("device-plugin", "--config", write(cfg, config), "--check", *extra)
    assert "example.com/fpga: 4 device(s), 0 of 8 allocatable" in p.stdout


def test_plugin_dir_must_exist(setup: tuple[Path, list[str]], tmp_path: Path) -> None:
    cfg, extra = setup
    config = {"resources": [{"name": "example.com/tty", "devnode": "/dev/ttyS*"}]}
    p = nfd("device-plugin", "--config", write(cfg, config), "--plugin-dir", str(tmp_path / "nope"), *extra)
    assert p.returncode == 2 and "--plugin-dir" in p.stderr and "not a directory" in p.stderr


def test_serves_registers_and_stops_on_sigterm(
    setup: tuple[Path, list[str]], plugin_dir: Path, tmp_path: Path
) -> None:
    cfg, extra = setup
    config = {
        "resources": [
            {"name": "example.com/tty", "devnode": "/dev/ttyS*", "cdi": True},
            {
                "name": "example.com/fpga",
                "pci": {"vendor": "1172"},
                "deviceNodes": ["/dev/vfio/{iommu_group}"],
            },
        ]
    }
    k = KubeletStandIn(plugin_dir)
    k.start()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "nfd",
        "device-plugin",
        "--config",
        write(cfg, config),
        "--plugin-dir",
        str(plugin_dir),
    ]
    cmd += ["--cdi-dir", str(tmp_path / "cdi"), *extra]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        names = {k.registered(timeout=20).resource_name, k.registered(timeout=20).resource_name}
        assert names == {"example.com/tty", "example.com/fpga"}
        with k.client("nfd-example.com_tty.sock") as c:
            resp = c.allocate(["ttyS0"]).container_responses[0]
        assert [d.name for d in resp.cdi_devices] == ["example.com/tty=ttyS0"]
        assert (tmp_path / "cdi/nfd-example.com-tty.json").is_file()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert wait_for(lambda: not any(p.name.startswith("nfd-") for p in plugin_dir.iterdir()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        k.stop()


def test_all_rejected_exits_1(setup: tuple[Path, list[str]], plugin_dir: Path) -> None:
    cfg, extra = setup
    k = KubeletStandIn(plugin_dir, refuse={"example.com/tty"})
    k.start()
    try:
        config = {"resources": [{"name": "example.com/tty", "devnode": "/dev/ttyS*"}]}
        p = nfd("device-plugin", "--config", write(cfg, config), "--plugin-dir", str(plugin_dir), *extra)
        assert p.returncode == 1
        assert "kubelet rejected the registration" in p.stderr and "example.com/tty" in p.stderr
    finally:
        k.stop()


def test_features_from_discover_json_output(fx: FixtureHost, tmp_path: Path) -> None:
    import json

    out = tmp_path / "discover.json"
    out.write_text(json.dumps({"labels": {}, "features": fx.features().to_dict()}))
    config = {"resources": [{"name": "example.com/serial", "usb": {"vendor": "0403"}}]}
    p = nfd(
        "device-plugin",
        "--config",
        write(tmp_path / "c.yaml", config),
        "--check",
        "--features",
        str(out),
        "--host-root",
        str(fx.root),
    )
    assert p.returncode == 0, p.stderr
    assert "example.com/serial: 2 device(s)" in p.stdout and "  1-1.2  Healthy" in p.stdout


def test_bad_features_file(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_text("{not json")
    config = {"resources": [{"name": "example.com/serial", "usb": {"vendor": "0403"}}]}
    p = nfd(
        "device-plugin",
        "--config",
        write(tmp_path / "c.yaml", config),
        "--check",
        "--features",
        str(tmp_path / "f.json"),
    )
    assert p.returncode == 2 and "--features" in p.stderr and "not JSON" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_no_resources_is_a_warning(setup: tuple[Path, list[str]]) -> None:
    cfg, extra = setup
    p = nfd("device-plugin", "--config", write(cfg, "resources: []\n"), "--check", *extra)
    assert p.returncode == 0
    assert "declares no resources; nothing to serve" in p.stderr and p.stdout == ""


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b"[" + b"1" * 5000 + b"]", "not JSON"),
        (b'{"attributes": {"a.b": {"elements": {"x": 1}}}}', "attributes.a.b.elements.x: expected a string"),
    ],
)
@pytest.mark.parametrize("command", ["device-plugin", "dra"])
def test_a_features_file_json_cannot_read_is_one_line(
    tmp_path: Path, content: bytes, needle: str, command: str
) -> None:
    """Bytes that are no UTF-8, a number Python will not convert: one line naming the
    file, not an internal error."""
    (tmp_path / "f.json").write_bytes(content)
    config = {"resources": [{"name": "example.com/serial", "usb": {"vendor": "0403"}}]}
    node = ["--node-name", "n1"] if command == "dra" else []
    p = nfd(
        command,
        *node,
        "--config",
        write(tmp_path / "c.yaml", config),
        "--check",
        "--features",
        str(tmp_path / "f.json"),
    )
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"nfd {command}: error: --features {tmp_path}/f.json: ") and needle in lines[0]
