from __future__ import annotations

import shutil

from fixtures import FixtureHost
from kubelet_standin import wait_for

from nfd.deviceplugin.config import parse_config
from nfd.deviceplugin.health import HealthMonitor
from nfd.deviceplugin.inventory import build_states


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
        assert mon._observer is None  # uevents describe the real /sys, not this tree
    finally:
        mon.stop()
