"""The one uevent listener: events of the watched subsystems handed on, an overrun
(ENOBUFS) answered by a full rescan, and both users (the worker's hot-plug, device
health) rescanning on it. A fake monitor stands in for pyudev's: a pipe to wake select,
and a queue of what poll() returns or raises (``tests.fakeuevents``)."""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from nfd.uevents import UeventListener, UeventsUnavailable
from tests.fakeuevents import Device, FakeMonitor, overrun


@pytest.fixture
def monitor() -> Iterator[FakeMonitor]:
    m = FakeMonitor()
    yield m
    m.close()


class Seen:
    def __init__(self) -> None:
        self.items: list[tuple[str, ...]] = []
        self.changed = threading.Condition()

    def add(self, *item: str) -> None:
        with self.changed:
            self.items.append(item)
            self.changed.notify_all()

    def wait(self, n: int) -> list[tuple[str, ...]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.items) >= n, timeout=10), self.items
            return list(self.items)


def listener(monitor: FakeMonitor, seen: Seen, subsystems: tuple[str, ...] = ("pci",)) -> UeventListener:
    return UeventListener(
        subsystems,
        on_event=lambda sub, action, dev: seen.add(sub, action, dev),
        on_overrun=lambda: seen.add("rescan"),
        name="test-uevents",
        open_monitor=lambda: monitor,
    )


def test_events_of_the_watched_subsystems_are_handed_on(monitor: FakeMonitor) -> None:
    seen = Seen()
    ue = listener(monitor, seen)
    ue.start()
    try:
        monitor.push(Device("usb", "add", "1-1"), Device("pci", "add", "0000:3b:00.0"))
        assert seen.wait(1) == [("pci", "add", "0000:3b:00.0")]
    finally:
        ue.stop()
    assert not [t for t in threading.enumerate() if t.name == "test-uevents"]


def test_an_overrun_triggers_a_rescan_and_listening_goes_on(monitor: FakeMonitor) -> None:
    seen = Seen()
    ue = listener(monitor, seen)
    ue.start()
    try:
        monitor.push(overrun())
        assert seen.wait(1) == [("rescan",)]
        monitor.push(Device("pci", "remove", "0000:3b:00.0"))
        assert seen.wait(2) == [("rescan",), ("pci", "remove", "0000:3b:00.0")]
        assert ue.overruns == 1
    finally:
        ue.stop()


def test_another_socket_error_ends_listening_with_a_warning(
    monitor: FakeMonitor, caplog: pytest.LogCaptureFixture
) -> None:
    seen = Seen()
    ue = listener(monitor, seen)
    with caplog.at_level(logging.WARNING, logger="nfd.uevents"):
        ue.start()
        try:
            monitor.push(OSError(errno.EBADF, "bad file descriptor"))
            with seen.changed:
                seen.changed.wait_for(lambda: "uevents stopped" in caplog.text, timeout=10)
        finally:
            ue.stop()
    assert "test-uevents: uevents stopped" in caplog.text
    assert seen.items == []


def test_no_monitor_is_a_reason_not_a_crash() -> None:
    def no_netlink() -> Any:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    ue = UeventListener(["pci"], on_event=lambda *_: None, on_overrun=lambda: None, open_monitor=no_netlink)
    with pytest.raises(UeventsUnavailable, match="PermissionError"):
        ue.start()
    ue.stop()  # nothing started: nothing to stop


# -- the two users ----------------------------------------------------------------


def test_hotplug_asks_for_a_pass_on_an_overrun(monitor: FakeMonitor) -> None:
    from nfd.worker.hotplug import UdevMonitor

    seen = Seen()
    m = UdevMonitor(open_monitor=lambda: monitor)
    m.start(lambda reason: seen.add(reason))
    try:
        monitor.push(Device("usb", "bind", "1-1"), overrun())
        assert seen.wait(2) == [("usb bind 1-1",), ("uevents lost (receive buffer overrun)",)]
    finally:
        m.stop()
