"""The worker in-process against a real master: hot-plug through the monitor adapter,
the fallback when udev is unavailable, and triggers during a pass."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from worker.worker_helpers import Master, wait_until

from nfd.config import SourcesConfig
from nfd.features import Features, Labels
from nfd.hostroot import HostRoot
from nfd.worker.agent import Agent
from nfd.worker.client import MasterClient
from nfd.worker.hotplug import FedMonitor
from nfd.worker.loop import Worker


class FakePciSource:
    """Stands in for the pci source: its device list is whatever the test plugs in."""

    name = "pci"

    def __init__(self) -> None:
        self.devices: list[dict[str, str]] = [{"class": "0300", "vendor": "1af4"}]
        self.calls = 0
        self.gate: threading.Event | None = None  # set: discover waits for it
        self.expires: datetime | None = None  # set: no devices from then on (a features.d expiry)

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        self.calls += 1
        expired = self.expires is not None and datetime.now(UTC) >= self.expires
        snapshot = [] if expired else list(self.devices)
        if self.gate is not None:
            self.gate.wait(5)
        f = Features()
        f.set_instances("pci.device", snapshot)
        return f

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        return {}


def pci_devices(master: Master, node: str) -> list[str] | None:
    """The PCI devices the master labels the node with (``class_vendor``)."""
    labels = master.labels(node)
    if labels is None:
        return None
    return sorted(k[len("pci-") : -len(".present")] for k in labels if k.startswith("pci-"))


@pytest.fixture
def source() -> FakePciSource:
    return FakePciSource()


@pytest.fixture
def make_agent(master: Master, source: FakePciSource, tmp_path: Path, node: str) -> Iterator:
    agents: list[Agent] = []

    def make(monitor: FedMonitor, *, interval: float = 3600.0, next_change: Any = None) -> Agent:
        worker = Worker(
            node=node,
            sources=[source],
            host=HostRoot.under(tmp_path),
            config=SourcesConfig(),
            client=MasterClient(master.url),
            next_change=next_change,
        )
        agent = Agent(worker, interval=interval, monitor=monitor, hotplug_debounce=0.3)
        agents.append(agent)
        agent.start()
        return agent

    yield make
    for a in agents:
        a.stop()


def test_hotplug_event_brings_the_new_device_to_the_master(
    master: Master, source: FakePciSource, make_agent, node: str
) -> None:
    monitor = FedMonitor()
    agent = make_agent(monitor)
    wait_until(lambda: pci_devices(master, node) == ["0300_1af4"], what="first")
    # The master sees the features before the pass is counted: wait for the count too.
    wait_until(lambda: agent.worker.passes == 1, what="the first pass to finish")
    passes = agent.worker.passes
    source.devices = [*source.devices, {"class": "0b40", "vendor": "8086"}]
    # A burst, as plugging in a card gives: one pass should follow, after it settles.
    for i in range(10):
        monitor.feed("pci", "add", f"0000:00:0{i}.0")
    wait_until(lambda: len(pci_devices(master, node) or []) == 2, timeout=10, what="the hot-plugged device")
    wait_until(lambda: agent.worker.passes == passes + 1, what="the debounced pass")
    assert agent.hotplug_live


def test_events_of_other_subsystems_are_ignored(
    master: Master, source: FakePciSource, make_agent, node: str
) -> None:
    monitor = FedMonitor()
    agent = make_agent(monitor)
    wait_until(lambda: agent.worker.passes == 1, what="the first pass")
    monitor.feed("block", "add", "sda")
    monitor.feed("pci", "unknown-action", "x")
    threading.Event().wait(0.6)  # longer than the debounce: a pass would have started
    assert agent.worker.passes == 1


def test_without_udev_the_worker_says_so_once_and_keeps_the_interval(
    master: Master, source: FakePciSource, make_agent, node: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="nfd.worker")
    agent = make_agent(FedMonitor(available=False), interval=0.2)
    wait_until(lambda: agent.worker.passes >= 4, what="interval passes")
    source.devices = []
    wait_until(lambda: pci_devices(master, node) == [], what="the change at an interval")
    notes = [r for r in caplog.records if "hot-plug events are not available" in r.getMessage()]
    assert len(notes) == 1
    assert not agent.hotplug_live


def test_a_trigger_during_a_pass_runs_another_pass(
    master: Master, source: FakePciSource, make_agent, node: str
) -> None:
    monitor = FedMonitor()
    agent = make_agent(monitor)
    wait_until(lambda: agent.worker.passes == 1, what="the first pass")
    source.gate = threading.Event()
    agent.scheduler.trigger("test: first")
    wait_until(lambda: agent.worker.pass_started is not None, what="a pass in progress")
    # The running pass has already read the devices; this change must not be lost.
    source.devices = [{"class": "1200", "vendor": "10de"}]
    agent.scheduler.trigger("test: during")
    source.gate.set()
    wait_until(lambda: pci_devices(master, node) == ["1200_10de"], what="the rerun")


def test_a_pass_runs_when_the_features_change_by_themselves(
    master: Master, source: FakePciSource, make_agent, node: str
) -> None:
    # A features.d line with an expiry time: the hook says when; the interval is an hour.
    asked: list[Features] = []
    expires = datetime.now(UTC) + timedelta(seconds=3)

    def next_change(features: Features) -> datetime | None:
        # As the local source answers: the line's expiry until it has passed. A pass in
        # between (a retry on a loaded machine) must not lose the expiry.
        asked.append(features)
        return expires if datetime.now(UTC) < expires else None

    source.expires = expires
    agent = make_agent(FedMonitor(), next_change=next_change)
    wait_until(lambda: agent.worker.passes >= 1, what="the first pass")
    assert agent.worker.changes_at == expires
    assert pci_devices(master, node) != []
    wait_until(lambda: pci_devices(master, node) == [], timeout=10, what="the pass at the expiry time")
    assert datetime.now(UTC) >= expires
    wait_until(lambda: agent.worker.passes >= 2, what="the count")
    assert agent.worker.changes_at is None
    assert agent.scheduler._sched.get_job("nfd-worker-features-change") is None


def test_stop_during_a_pass_waits_for_it_and_returns(
    master: Master, source: FakePciSource, make_agent, node: str
) -> None:
    # SIGTERM while a pass runs (a rollout that restarts the master too makes that
    # likely): the pass ends, reschedules nothing, and stop() returns.
    agent = make_agent(FedMonitor())
    wait_until(lambda: agent.worker.passes == 1, what="the first pass")
    source.gate = threading.Event()
    agent.scheduler.trigger("test: a pass to stop in")
    wait_until(lambda: agent.worker.pass_started is not None, what="a pass in progress")
    stopper = threading.Thread(target=agent.stop, daemon=True)
    stopper.start()
    wait_until(lambda: not agent.scheduler.running, what="the scheduler to begin stopping")
    assert stopper.is_alive()  # it waits for the running pass
    source.gate.set()
    stopper.join(10)
    assert not stopper.is_alive(), "stop() hung behind the pass it waited for"
    assert agent.worker.passes == 2
    assert pci_devices(master, node) == ["0300_1af4"]
