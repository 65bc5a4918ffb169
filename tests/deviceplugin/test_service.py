"""The plugin against a kubelet stand-in, over real unix sockets."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import grpc
import pytest
from cdi_check import problems as cdi_problems
from kubelet_standin import KubeletStandIn, wait_for

FPGA = {
    "name": "example.com/fpga",
    "pci": {"vendor": "1172"},
    "deviceNodes": ["/dev/vfio/{iommu_group}", "/dev/vfio/vfio"],
}


def test_register_then_list(start_plugin, kubelet: KubeletStandIn, plugin_dir: Path) -> None:
    start_plugin({"resources": [FPGA]})
    req = kubelet.registered()
    assert req.version == "v1beta1"
    assert req.resource_name == "example.com/fpga"
    assert req.endpoint == "nfd-example.com_fpga.sock"
    assert (plugin_dir / req.endpoint).is_socket()
    assert req.options.get_preferred_allocation_available
    assert not req.options.pre_start_required
    with kubelet.client(req.endpoint) as c:
        assert c.options().get_preferred_allocation_available
        w = c.watch()
        msg = w.raw.get(timeout=5)
        w.cancel()
    devs = {d.ID: d for d in msg.devices}
    assert sorted(devs) == ["0000:3b:00.0", "0000:3c:00.0", "0000:af:00.0", "0000:b0:00.0"]
    assert all(d.health == "Healthy" for d in devs.values())
    assert [n.ID for n in devs["0000:af:00.0"].topology.nodes] == [1]
    assert [n.ID for n in devs["0000:3b:00.0"].topology.nodes] == [0]


def test_no_numa_means_empty_topology(start_plugin, kubelet: KubeletStandIn) -> None:
    start_plugin(
        {
            "resources": [
                {
                    "name": "example.com/vga",
                    "pci": {"class": "03"},
                    "deviceNodes": ["/dev/vfio/{iommu_group}"],
                }
            ]
        }
    )
    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c:
        w = c.watch()
        msg = w.raw.get(timeout=5)
        w.cancel()
    assert [d.ID for d in msg.devices] == ["0000:00:02.0"]
    assert not msg.devices[0].HasField("topology") or not msg.devices[0].topology.nodes


def test_allocate_nodes_env_mounts(start_plugin, kubelet: KubeletStandIn) -> None:
    res = {
        **FPGA,
        "mounts": [{"hostPath": "/opt/fpga/{address}", "containerPath": "/opt/fpga"}],
        "env": {"FPGA_GROUPS": "{iommu_group}", "MODE": "fast"},
    }
    start_plugin({"resources": [res]})
    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c:
        resp = c.allocate(["0000:3b:00.0", "0000:3c:00.0"], ["0000:af:00.0"])
    first, second = resp.container_responses
    assert first.envs["PCIDEVICE_EXAMPLE_COM_FPGA"] == "0000:3b:00.0,0000:3c:00.0"
    assert first.envs["FPGA_GROUPS"] == "12,13"
    assert first.envs["MODE"] == "fast"
    assert [(d.host_path, d.container_path, d.permissions) for d in first.devices] == [
        ("/dev/vfio/12", "/dev/vfio/12", "rwm"),
        ("/dev/vfio/vfio", "/dev/vfio/vfio", "rwm"),
        ("/dev/vfio/13", "/dev/vfio/13", "rwm"),
    ]
    # Two devices want the same container path: the first one wins, no duplicate mount.
    assert [(m.host_path, m.container_path, m.read_only) for m in first.mounts] == [
        ("/opt/fpga/0000:3b:00.0", "/opt/fpga", True)
    ]
    assert second.envs["PCIDEVICE_EXAMPLE_COM_FPGA"] == "0000:af:00.0"
    assert [d.host_path for d in second.devices] == ["/dev/vfio/40", "/dev/vfio/vfio"]
    assert not first.cdi_devices


def test_allocate_unknown_ids_is_invalid_argument(start_plugin, kubelet: KubeletStandIn) -> None:
    start_plugin({"resources": [FPGA]})
    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c, pytest.raises(grpc.RpcError) as e:
        c.allocate(["0000:3b:00.0", "nope", "0000:99:00.0"])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "nope" in e.value.details() and "0000:99:00.0" in e.value.details()


def test_allocate_unhealthy_is_failed_precondition_and_updates_stream(
    start_plugin, kubelet: KubeletStandIn, fx
) -> None:
    # A slow poll: the failing Allocate itself must notice and tell ListAndWatch.
    start_plugin({"resources": [FPGA]})
    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c:
        w = c.watch()
        w.until(lambda s: s.get("0000:3c:00.0") == "Healthy")
        (fx.root / "dev/vfio/13").unlink()
        with pytest.raises(grpc.RpcError) as e:
            c.allocate(["0000:3b:00.0", "0000:3c:00.0"])
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "0000:3c:00.0" in e.value.details() and "/dev/vfio/13" in e.value.details()
        assert "0000:3b:00.0:" not in e.value.details()
        _, snap = w.until(lambda s: s.get("0000:3c:00.0") == "Unhealthy")
        assert snap["0000:3b:00.0"] == "Healthy"
        w.cancel()


def test_cdi_names_and_spec_file(start_plugin, kubelet: KubeletStandIn, tmp_path: Path) -> None:
    res = {
        **FPGA,
        "cdi": True,
        "mounts": [{"hostPath": "/opt/fw", "containerPath": "/fw", "readOnly": False}],
    }
    start_plugin({"resources": [res]})
    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c:
        resp = c.allocate(["0000:af:00.0", "0000:3b:00.0"]).container_responses[0]
    assert [d.name for d in resp.cdi_devices] == [
        "example.com/fpga=0000:af:00.0",
        "example.com/fpga=0000:3b:00.0",
    ]
    assert not resp.devices and not resp.mounts  # they travel in the spec
    assert resp.envs["PCIDEVICE_EXAMPLE_COM_FPGA"] == "0000:af:00.0,0000:3b:00.0"

    files = sorted((tmp_path / "cdi").iterdir())
    assert [f.name for f in files] == ["nfd-example.com-fpga.json"]  # no temp file left behind
    spec = json.loads(files[0].read_text())
    assert cdi_problems(spec) == []
    assert set(spec) == {"cdiVersion", "kind", "devices"}
    assert spec["cdiVersion"] == "1.0.0" and spec["kind"] == "example.com/fpga"
    by_name = {d["name"]: d for d in spec["devices"]}
    assert sorted(by_name) == ["0000:3b:00.0", "0000:3c:00.0", "0000:af:00.0", "0000:b0:00.0"]
    edits = by_name["0000:af:00.0"]["containerEdits"]
    assert set(by_name["0000:af:00.0"]) == {"name", "containerEdits"}
    assert set(edits) <= {"env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", "netDevices"}
    assert edits["deviceNodes"] == [
        {"path": "/dev/vfio/40", "hostPath": "/dev/vfio/40", "permissions": "rwm"},
        {"path": "/dev/vfio/vfio", "hostPath": "/dev/vfio/vfio", "permissions": "rwm"},
    ]
    assert edits["mounts"] == [
        {"hostPath": "/opt/fw", "containerPath": "/fw", "options": ["rw", "nosuid", "nodev", "bind"]}
    ]
    for name in by_name:
        assert f"example.com/fpga={name}".count("=") == 1


def test_replicas_share_a_device(start_plugin, kubelet: KubeletStandIn) -> None:
    start_plugin({"resources": [{"name": "example.com/serial", "usb": {"vendor": "0403"}, "replicas": 3}]})
    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c:
        w = c.watch()
        _, snap = w.until(lambda s: bool(s))
        w.cancel()
        assert sorted(snap) == [f"{p}::{n}" for p in ("1-1.2", "1-1.3") for n in range(3)]
        resp = c.allocate(["1-1.2::0", "1-1.2::2"]).container_responses[0]
        assert [(d.host_path, d.permissions) for d in resp.devices] == [("/dev/bus/usb/001/005", "rw")]
        # Preferred allocation spreads replicas over physical devices.
        got = c.preferred(sorted(snap), [], 2)
        assert {g.split("::")[0] for g in got} == {"1-1.2", "1-1.3"}


def test_preferred_allocation_numa(start_plugin, kubelet: KubeletStandIn) -> None:
    start_plugin({"resources": [FPGA]})
    req = kubelet.registered()
    all_ids = ["0000:3b:00.0", "0000:3c:00.0", "0000:af:00.0", "0000:b0:00.0"]
    with kubelet.client(req.endpoint) as c:
        # must_include on node 1 pulls its partner from node 1, not the first in order.
        assert c.preferred(all_ids, ["0000:b0:00.0"], 2) == ["0000:b0:00.0", "0000:af:00.0"]
        assert c.preferred(all_ids, [], 2) == ["0000:3b:00.0", "0000:3c:00.0"]
        # Node 0 has only one left: both from node 1.
        assert c.preferred(["0000:3c:00.0", "0000:af:00.0", "0000:b0:00.0"], [], 2) == [
            "0000:af:00.0",
            "0000:b0:00.0",
        ]
        got = c.preferred(all_ids, [], 3)
        assert len(got) == 3 and len(set(got)) == 3


def test_unplugged_and_back(start_plugin, kubelet: KubeletStandIn, fx) -> None:
    start_plugin({"resources": [FPGA]})
    req = kubelet.registered()
    sysdir = fx.root / "sys/bus/pci/devices/0000:af:00.0"
    with kubelet.client(req.endpoint) as c:
        w = c.watch()
        w.until(lambda s: s.get("0000:af:00.0") == "Healthy")
        shutil.move(sysdir, fx.root / "gone")
        _, snap = w.until(lambda s: s.get("0000:af:00.0") == "Unhealthy")
        assert sum(v == "Healthy" for v in snap.values()) == 3
        shutil.move(fx.root / "gone", sysdir)
        w.until(lambda s: s.get("0000:af:00.0") == "Healthy")
        assert c.allocate(["0000:af:00.0"]).container_responses[0].envs
        w.cancel()


def test_driver_unbound_and_rebound(start_plugin, kubelet: KubeletStandIn, fx) -> None:
    start_plugin({"resources": [FPGA]})
    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c:
        w = c.watch()
        w.until(lambda s: s.get("0000:3b:00.0") == "Healthy")
        fx.unbind("0000:3b:00.0")
        w.until(lambda s: s.get("0000:3b:00.0") == "Unhealthy")
        fx.bind("0000:3b:00.0", "vfio-pci")
        w.until(lambda s: s.get("0000:3b:00.0") == "Healthy")
        (fx.root / "sys/bus/pci/drivers/other").mkdir()
        fx.bind("0000:3b:00.0", "other")  # bound to a different driver: not ours to hand out
        w.until(lambda s: s.get("0000:3b:00.0") == "Unhealthy")
        w.cancel()


def test_one_health_event_reaches_list_and_watch_and_the_metrics(
    start_plugin, kubelet: KubeletStandIn, fx
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from nfd.devices.metrics import HealthMetrics
    from nfd.promtext import Registry

    registry = Registry()
    m = start_plugin({"resources": [FPGA]})
    m.health.subscribe(HealthMetrics(registry).changed)

    def unhealthy() -> float:
        [family] = [f for f in text_string_to_metric_families(registry.exposition().decode())
                    if f.name == "nfd_devices_unhealthy"]  # fmt: skip
        [sample] = [s for s in family.samples if s.labels == {"resource": FPGA["name"]}]
        return float(sample.value)

    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c:
        w = c.watch()
        w.until(lambda s: s.get("0000:3b:00.0") == "Healthy")
        assert unhealthy() == 0
        fx.unbind("0000:3b:00.0")
        w.until(lambda s: s.get("0000:3b:00.0") == "Unhealthy")
        assert wait_for(lambda: unhealthy() == 1)
        fx.bind("0000:3b:00.0", "vfio-pci")
        w.until(lambda s: s.get("0000:3b:00.0") == "Healthy")
        assert wait_for(lambda: unhealthy() == 0)
        w.cancel()


def test_device_node_glob_gone_and_back(start_plugin, kubelet: KubeletStandIn, fx) -> None:
    start_plugin({"resources": [{"name": "example.com/tty", "devnode": "/dev/ttyS[0-2]"}]})
    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c:
        w = c.watch()
        _, snap = w.until(lambda s: bool(s))
        assert sorted(snap) == ["ttyS0", "ttyS1", "ttyS2"]
        resp = c.allocate(["ttyS1"]).container_responses[0]
        assert [(d.host_path, d.container_path, d.permissions) for d in resp.devices] == [
            ("/dev/ttyS1", "/dev/ttyS1", "rwm")
        ]
        (fx.root / "dev/ttyS1").unlink()
        w.until(lambda s: s.get("ttyS1") == "Unhealthy")
        fx.touch("dev/ttyS1")
        w.until(lambda s: s.get("ttyS1") == "Healthy")
        w.cancel()


def test_usb_replug_follows_new_device_number(start_plugin, kubelet: KubeletStandIn, fx) -> None:
    start_plugin(
        {"resources": [{"name": "example.com/serial", "usb": {"vendor": "0403", "product": "6001"}}]}
    )
    req = kubelet.registered()
    with kubelet.client(req.endpoint) as c:
        w = c.watch()
        w.until(lambda s: s.get("1-1.2") == "Healthy")
        shutil.rmtree(fx.root / "sys/bus/usb/devices/1-1.2")
        (fx.root / "dev/bus/usb/001/005").unlink()
        w.until(lambda s: s.get("1-1.2") == "Unhealthy")
        fx.add_usb("1-1.2", "1", "9")  # plugged in again: new device number
        w.until(lambda s: s.get("1-1.2") == "Healthy")
        resp = c.allocate(["1-1.2"]).container_responses[0]
        assert [d.host_path for d in resp.devices] == ["/dev/bus/usb/001/009"]
        w.cancel()


def test_pre_start_check(start_plugin, kubelet: KubeletStandIn, fx) -> None:
    start_plugin({"resources": [{**FPGA, "preStartCheck": True}]})
    req = kubelet.registered()
    assert req.options.pre_start_required
    with kubelet.client(req.endpoint) as c:
        c.pre_start(["0000:3b:00.0"])
        fx.unbind("0000:3b:00.0")
        with pytest.raises(grpc.RpcError) as e:
            c.pre_start(["0000:3b:00.0"])
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "driver vfio-pci unbound" in e.value.details()


def test_kubelet_restart_reregisters(start_plugin, kubelet: KubeletStandIn, plugin_dir: Path) -> None:
    m = start_plugin({"resources": [FPGA, {"name": "example.com/tty", "devnode": "/dev/ttyS*"}]})
    first = {kubelet.registered().resource_name, kubelet.registered().resource_name}
    assert first == {"example.com/fpga", "example.com/tty"}
    assert wait_for(lambda: m.registrations("example.com/fpga") == m.registrations("example.com/tty") == 1)
    old = os.stat(plugin_dir / "nfd-example.com_fpga.sock")
    kubelet.restart()  # deletes every socket, new kubelet.sock
    again = {kubelet.registered().resource_name, kubelet.registered().resource_name}
    assert again == first
    assert wait_for(lambda: m.registrations("example.com/fpga") == 2)
    sock = plugin_dir / "nfd-example.com_fpga.sock"
    new = os.stat(sock)
    assert sock.is_socket() and (new.st_ino, new.st_ctime_ns) != (old.st_ino, old.st_ctime_ns)
    with kubelet.client(sock.name) as c:
        assert c.allocate(["0000:3b:00.0"]).container_responses[0].envs


def test_waits_for_kubelet(start_plugin, plugin_dir: Path) -> None:
    m = start_plugin({"resources": [FPGA]})
    assert (plugin_dir / "nfd-example.com_fpga.sock").is_socket()  # serves before kubelet is there
    k = KubeletStandIn(plugin_dir)
    k.start()
    try:
        assert k.registered().resource_name == "example.com/fpga"
        assert wait_for(lambda: m.registrations("example.com/fpga") == 1)
    finally:
        k.stop()


def test_registration_refused_stops_only_that_resource(start_plugin, plugin_dir: Path, caplog) -> None:
    k = KubeletStandIn(plugin_dir, refuse={"example.com/fpga"})
    k.start()
    try:
        m = start_plugin({"resources": [FPGA, {"name": "example.com/tty", "devnode": "/dev/ttyS*"}]})
        assert k.registered().resource_name == "example.com/tty"
        assert wait_for(lambda: "example.com/fpga" in m.rejected())
        assert "taken" in m.rejected()["example.com/fpga"]
        assert m.served_resources() == ["example.com/tty"]
        assert wait_for(lambda: not (plugin_dir / "nfd-example.com_fpga.sock").exists())
        assert (plugin_dir / "nfd-example.com_tty.sock").is_socket()
        assert any(
            "rejected" in r.getMessage() and "example.com/fpga" in r.getMessage() for r in caplog.records
        )
    finally:
        k.stop()


def test_own_socket_deleted_is_served_again(start_plugin, kubelet: KubeletStandIn, plugin_dir: Path) -> None:
    m = start_plugin({"resources": [FPGA]})
    kubelet.registered()
    sock = plugin_dir / "nfd-example.com_fpga.sock"
    sock.unlink()
    assert kubelet.registered().resource_name == "example.com/fpga"
    assert sock.is_socket()
    assert wait_for(lambda: m.registrations("example.com/fpga") == 2)


def test_kubelet_not_answering_is_retried(start_plugin, plugin_dir: Path, caplog) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="nfd.deviceplugin")
    (plugin_dir / "kubelet.sock").write_text("")  # a stale file nobody listens on
    m = start_plugin({"resources": [FPGA]})
    assert wait_for(lambda: sum("retry in" in r.getMessage() for r in caplog.records) >= 2)
    assert m.registrations("example.com/fpga") == 0 and not m.rejected()
    (plugin_dir / "kubelet.sock").unlink()
    k = KubeletStandIn(plugin_dir)
    k.start()
    try:
        assert k.registered().resource_name == "example.com/fpga"
    finally:
        k.stop()


def test_iommu_group_from_sysfs_when_features_lack_it(
    fx, plugin_dir: Path, kubelet: KubeletStandIn, tmp_path: Path
) -> None:
    from nfd.devices.config import parse_config
    from nfd.devices.inventory import build_states

    feats = fx.features()
    for inst in feats.instances["pci.device"]:
        del inst["iommu_group"]
    (fx.root / "sys/kernel/iommu_groups/77").mkdir(parents=True)
    os.symlink("../../../../kernel/iommu_groups/77", fx.root / "sys/bus/pci/devices/0000:3b:00.0/iommu_group")
    fx.touch("dev/vfio/77")
    cfg = parse_config({"resources": [FPGA]})
    states, _ = build_states(cfg.resources, features=feats, host=fx.host)
    edits = states[0].allocate(["0000:3b:00.0"])
    assert [d.host_path for d in edits.devices] == ["/dev/vfio/77", "/dev/vfio/vfio"]


def test_kind_close_called_on_stop(fx, plugin_dir: Path) -> None:
    from nfd.deviceplugin.manager import Manager
    from nfd.devices.config import parse_config
    from nfd.devices.inventory import build_states
    from nfd.devices.kinds import default_kinds
    from nfd.devices.kinds.devnode import DevNodeKind

    class ClosingKind(DevNodeKind):
        name = "closing"
        closed = 0

        def close(self) -> None:
            ClosingKind.closed += 1

    kinds = default_kinds().with_kind(ClosingKind())
    cfg = parse_config({"resources": [{"name": "example.com/t", "closing": "/dev/ttyS0"}]}, kinds)
    states, _ = build_states(cfg.resources, features=fx.features(), host=fx.host)
    m = Manager(states, plugin_dir=str(plugin_dir), use_udev=False)
    m.start()
    assert m.served_resources() == ["example.com/t"]
    m.stop()
    assert ClosingKind.closed == 1


def test_usb_replug_rewrites_cdi_spec(start_plugin, kubelet: KubeletStandIn, fx, tmp_path: Path) -> None:
    start_plugin({"resources": [{"name": "example.com/serial", "usb": {"product": "6001"}, "cdi": True}]})
    kubelet.registered()
    spec = tmp_path / "cdi/nfd-example.com-serial.json"

    def node_of_port() -> str:
        devs = {d["name"]: d for d in json.loads(spec.read_text())["devices"]}
        return devs["1-1.2"]["containerEdits"]["deviceNodes"][0]["hostPath"]

    assert node_of_port() == "/dev/bus/usb/001/005"
    assert cdi_problems(json.loads(spec.read_text())) == []
    shutil.rmtree(fx.root / "sys/bus/usb/devices/1-1.2")
    fx.add_usb("1-1.2", "1", "12")
    assert wait_for(lambda: node_of_port() == "/dev/bus/usb/001/012")


def test_long_device_ids_are_shortened(fx, plugin_dir: Path) -> None:
    from nfd.devices.config import parse_config
    from nfd.devices.inventory import build_states

    long_name = "dev/" + "x" * 80
    fx.touch(long_name)
    cfg = parse_config({"resources": [{"name": "example.com/l", "devnode": "/dev/xxxx*", "replicas": 12}]})
    states, _ = build_states(cfg.resources, features=fx.features(), host=fx.host)
    ids = [sid for sid, _ in states[0].slots]
    assert len(ids) == 12 and len(set(ids)) == 12
    assert all(len(i) <= 63 for i in ids)
    assert ids[11].endswith("::11") and ids[0].startswith("xxxx")
    assert [d.host_path for d in states[0].allocate([ids[3]]).devices] == ["/" + long_name]


def test_plugin_dir_gone_and_back(start_plugin, kubelet: KubeletStandIn, plugin_dir: Path, caplog) -> None:
    m = start_plugin({"resources": [FPGA]})
    kubelet.registered()
    assert wait_for(lambda: m.registrations("example.com/fpga") == 1)  # the answer arrived too
    kubelet.stop()
    shutil.rmtree(plugin_dir)
    assert wait_for(lambda: any("cannot listen" in r.getMessage() for r in caplog.records))
    plugin_dir.mkdir()
    kubelet.start()
    assert kubelet.registered().resource_name == "example.com/fpga"
    assert wait_for(lambda: m.registrations("example.com/fpga") == 2)
