from __future__ import annotations

import shutil

import pytest
from fixtures import FixtureHost
from kubelet_standin import wait_for

from nfd.devices.config import parse_config
from nfd.devices.health import HealthMonitor
from nfd.devices.inventory import AllocationError, build_states
from nfd.devices.kinds.model import host_file
from nfd.hostroot import HostRoot
from tests.fakeuevents import FakeMonitor, overrun


def test_wake_rechecks_at_once_without_waiting_for_the_poll(fx: FixtureHost) -> None:
    # What a udev event does: the next check runs now, not at the next (here 60 s) tick.
    cfg = parse_config({"resources": [{"name": "example.com/s", "usb": {"vendor": "0403"}}]})
    states, _ = build_states(cfg.resources, features=fx.features(), host=fx.host)
    mon = HealthMonitor(states, interval=60, use_udev=False)
    mon.start()
    try:
        assert wait_for(lambda: states[0].reasons() == [None, None])
        shutil.rmtree(fx.root / "sys/bus/usb/devices/1-1.3")
        mon.wake()
        assert wait_for(lambda: states[0].reasons()[1] == "USB device unplugged", timeout=5)
        assert states[0].reasons()[0] is None
    finally:
        mon.stop()


def test_fixture_host_does_not_listen_to_real_uevents(fx: FixtureHost) -> None:
    cfg = parse_config({"resources": [{"name": "example.com/s", "usb": {"vendor": "0403"}}]})
    states, _ = build_states(cfg.resources, features=fx.features(), host=fx.host)
    mon = HealthMonitor(states, interval=60, use_udev=True)
    mon.start()
    try:
        assert mon._uevents is None  # uevents describe the real /sys, not this tree
    finally:
        mon.stop()


def test_an_uevent_overrun_rechecks_every_device(fx: FixtureHost) -> None:
    # Events were lost, maybe this device's: no poll for a minute, yet its unbind is seen.
    cfg = parse_config({"resources": [{"name": "example.com/f", "pci": {"vendor": "1172"}}]})
    states, _ = build_states(cfg.resources, features=fx.features(), host=fx.host)
    monitor = FakeMonitor()
    mon = HealthMonitor(
        states, interval=60, use_udev=True, open_monitor=lambda: monitor, uevents_sys=fx.host.sys
    )
    mon.start()
    try:
        assert wait_for(lambda: all(r is None for r in states[0].reasons()))
        fx.unbind("0000:3b:00.0")
        monitor.push(overrun())
        assert wait_for(lambda: states[0].reasons()[0] is not None, timeout=5)
    finally:
        mon.stop()
        monitor.close()


def test_host_paths_are_seen_under_the_host_root() -> None:
    host = HostRoot(sys="/host-sys", dev="/host-dev", run="/host-run", var="/host-var")
    assert host_file(host, "/dev/vfio/12") == "/host-dev/vfio/12"
    assert host_file(host, "/dev") == "/host-dev"
    assert host_file(host, "/sys/bus/pci/devices/0000:3b:00.0") == "/host-sys/bus/pci/devices/0000:3b:00.0"
    assert host_file(host, "/run/nvidia/driver") == "/host-run/nvidia/driver"
    assert host_file(host, "/var/lib/x") == "/host-var/lib/x"
    # Only whole first components are mapped; other paths are taken as they are.
    assert host_file(host, "/device/x") == "/device/x"
    assert host_file(host, "/opt/lib/libx.so") == "/opt/lib/libx.so"


def test_device_node_removed_fails_the_allocate_re_check(fx: FixtureHost) -> None:
    cfg = parse_config(
        {
            "resources": [
                {
                    "name": "example.com/f",
                    "pci": {"vendor": "1172"},
                    "deviceNodes": ["/dev/vfio/{iommu_group}"],
                }
            ]
        }
    )
    states, _ = build_states(cfg.resources, features=fx.features(), host=fx.host)
    assert states[0].allocate(["0000:3b:00.0"]).devices[0].host_path == "/dev/vfio/12"
    (fx.root / "dev/vfio/12").unlink()
    with pytest.raises(AllocationError, match="device node /dev/vfio/12 missing"):
        states[0].allocate(["0000:3b:00.0"])
    assert states[0].reasons()[0] == "device node /dev/vfio/12 missing"
