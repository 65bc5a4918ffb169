"""The DRA driver's moving parts, wired: device health, the slice publisher loop and the
kubelet plugin, all over one :class:`nfd.dra.slices.DraInventory`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from nfd.backoff import Backoff
from nfd.devices.health import HealthMonitor
from nfd.devices.inventory import ResourceState, close_states
from nfd.devices.kinds.model import FoundDevice
from nfd.dra.slices import DraInventory, TaintPolicy
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.kube.transport import Transport
from nfd.loopthread import LoopThread

log = logging.getLogger("nfd.dra")


class SliceLoop:
    """Publishes the pool whenever a device's health changes (woken by the health
    monitor, and checked every ``interval`` seconds: a version comparison, no I/O),
    unhealthy devices tainted as ``taints`` says, and re-reads the API server
    every ``resync`` seconds to repair slices changed by someone else. A failed write is
    retried with backoff."""

    def __init__(
        self,
        inventory: DraInventory,
        sync: Callable[..., int],
        *,
        taints: TaintPolicy | None = None,
        interval: float = 0.05,
        resync: float = 60.0,
    ) -> None:
        from nfd.dra.publisher import PublishError

        self.inventory = inventory
        self._sync = sync
        self.taints = taints
        self.interval = interval
        self.resync = resync
        self.published = threading.Event()  # set after the first successful sync
        self.syncs = 0
        self._seen: tuple[int, ...] | None = None
        self._next_resync = 0.0
        # Each node writes only its own slices: exact steps.
        self._loop = LoopThread(
            "nfd-dra-slices",
            self._round,
            interval=interval,
            backoff=Backoff(initial=0.2, cap=10.0, jitter=0),
            logger=log,
            expected=(PublishError,),
        )

    def start(self) -> None:
        self._loop.start()

    def _round(self) -> None:
        now = time.monotonic()
        version = self.inventory.version()
        force = now >= self._next_resync
        if version == self._seen and not force:
            return
        # raising: the loop retries
        self._sync(
            self.inventory.published(self.taints), force=force, counter_sets=self.inventory.counter_sets()
        )
        self._seen = version
        self.syncs += 1
        self.published.set()
        if force:
            self._next_resync = now + self.resync

    def wake(self) -> None:
        self._loop.wake()

    def stop(self) -> None:
        self._loop.stop()


# A fresh discovery: the DRA resources' states, with the features and host they came from.
Rediscover = Callable[[], tuple[Sequence[ResourceState], Features, HostRoot]]


class Rediscovery:
    """Runs discovery again every ``interval`` seconds; when the set of devices differs
    (a device plugged in, one removed for good), the inventory serves the new set. A
    resource whose devices are unchanged keeps its state (and its health history).

    A device one pass does not find stays served until the next pass: its node missing
    for a moment (a driver reload, a rename) is what the health poll already shows as a
    taint, and a claim that holds the device should hear "unhealthy", not lose it from the
    pool. A device two passes in a row do not find leaves the pool, but is still watched:
    every ``watch_interval`` seconds its health is checked as a served device's is, and
    once it is healthy again a pass runs at once, so its return is published without
    waiting for the next scheduled pass. It is watched until a pass finds it again."""

    def __init__(
        self,
        inventory: DraInventory,
        health: HealthMonitor,
        discover: Rediscover,
        *,
        interval: float,
        watch_interval: float = 0.2,
    ) -> None:
        self.inventory = inventory
        self.health = health
        self.discover = discover
        self.interval = interval
        self.watch_interval = watch_interval
        # Resource name -> a state over its devices that passes no longer find.
        self.departed: dict[str, ResourceState] = {}
        # (resource, device) served but not found by the last pass: the next miss departs it.
        self.missing: set[tuple[str, str]] = set()
        self._pass = threading.Lock()  # one pass at a time (the loop's, or a caller's)
        self._next_pass = 0.0
        self._loop = LoopThread("nfd-dra-rediscover", self._round, interval=watch_interval, logger=log)

    def start(self) -> None:
        self._next_pass = time.monotonic() + self.interval
        self._loop.start()

    def _round(self) -> float:
        """Watch departed devices; a pass when one is back or the interval is up. A
        failed pass keeps the current view, and the next comes an interval later."""
        back = self._returned()
        if back or time.monotonic() >= self._next_pass:
            if back:
                log.info("rediscovery: %s back; looking for devices now", ", ".join(back))
            self._next_pass = time.monotonic() + self.interval
            self.once()
        return min(self.watch_interval, max(0.0, self._next_pass - time.monotonic()))

    def _returned(self) -> list[str]:
        """Departed devices that turned healthy since the last look."""
        with self._pass:
            departed = list(self.departed.values())
        back: list[str] = []
        for s in departed:
            before = s.reasons()
            try:
                s.refresh()
            except Exception as e:  # cannot tell: not back; a served device's check says more
                log.debug("rediscovery: %s: watching departed devices: %s: %s", s.name, type(e).__name__, e)
                continue
            back += [
                f"{s.name} {pid}"
                for pid, was, now in zip(s.physical_ids, before, s.reasons(), strict=True)
                if was is not None and now is None
            ]
        return back

    def stop(self) -> None:
        self._loop.stop()
        with self._pass:
            for s in self.departed.values():
                s.close()
            self.departed = {}

    def once(self) -> bool:
        """One round; True when the served set changed."""
        with self._pass:
            states, features, host = self.discover()
            have = {s.name: s for s in self.inventory.states}
            keep: list[ResourceState] = []
            unused: list[ResourceState] = []
            missing: set[tuple[str, str]] = set()
            for s in states:
                old = have.get(s.name)
                lost = {(s.name, p) for p in set(old.physical_ids) - set(s.physical_ids)} if old else set()
                if old is not None and (old.physical_ids == s.physical_ids or lost - self.missing):
                    # Unchanged, or a device missed for the first time: the old view for a
                    # pass longer (a device plugged in beside it waits that pass too).
                    keep.append(old)
                    unused.append(s)
                    missing |= lost
                else:
                    keep.append(s)
            self.missing = missing
            if {(s.name, p) for s in keep for p in s.physical_ids} == self.inventory.devices_of():
                for s in states:
                    s.close()
                return False
            log.info("rediscovery: the node's devices changed; publishing the new set")
            departed = self._departed(keep)
            gone = self.inventory.replace(keep, features=features, host=host)
            self.health.states = list(keep)
            for s in [*gone, *unused, *self.departed.values()]:
                s.close()
            self.departed = departed
            return True

    def _departed(self, keep: Sequence[ResourceState]) -> dict[str, ResourceState]:
        """Per resource, a new state over the devices served or watched until now that
        ``keep`` does not have."""
        found = {(s.name, pid) for s in keep for pid in s.physical_ids}
        lost: dict[str, tuple[ResourceState, dict[str, FoundDevice]]] = {}
        for s in [*self.inventory.states, *self.departed.values()]:
            for pid, d in s.found():
                if (s.name, pid) not in found:
                    lost.setdefault(s.name, (s, {}))[1].setdefault(pid, d)
        return {
            name: ResourceState(s.res, list(devices.values()), s.host) for name, (s, devices) in lost.items()
        }


class DraDriver:
    """Everything ``nfd dra`` runs; ``api`` is its transport to the API server; ``instance``
    this pod's UID, for rolling updates (see :mod:`nfd.dra.plugin`)."""

    def __init__(
        self,
        states: Sequence[ResourceState],
        inventory: DraInventory,
        *,
        api: Transport,
        driver: str,
        node: str,
        plugin_dir: str,
        registry_dir: str,
        cdi_dir: str,
        poll_interval: float = 0.2,
        use_udev: bool = True,
        rediscover: Rediscover | None = None,
        rediscover_interval: float = 10.0,
        taint_effect: str = "NoSchedule",
        node_events: bool = True,
        instance: str = "",
    ) -> None:
        import os

        from nfd.devices.metrics import HealthMetrics
        from nfd.dra.claimstatus import ClaimStatusApi
        from nfd.dra.events import NodeEvents
        from nfd.dra.health import HealthService
        from nfd.dra.metrics import DraMetrics
        from nfd.dra.plugin import KubeletPlugin
        from nfd.dra.prepare import Preparer
        from nfd.dra.publisher import REQUEST_TIMEOUT_S, ClaimReaderApi, SlicePublisher
        from nfd.promtext import Registry

        self.states = list(states)
        self.inventory = inventory
        self.health = HealthMonitor(self.states, interval=poll_interval, use_udev=use_udev)
        self.publisher = SlicePublisher(api, driver=driver, node=node)
        self.slices = SliceLoop(
            inventory, self.publisher.sync, taints=TaintPolicy.for_driver(driver, taint_effect)
        )
        # What /metrics serves (nfd dra --port).
        self.registry = Registry()
        self.health_metrics = HealthMetrics(self.registry)
        self.dra_metrics = DraMetrics(self.registry)
        self.health_stream = HealthService(inventory, pool=node)
        self.events = NodeEvents(api, node=node) if node_events else None
        self.preparer = Preparer(
            inventory,
            driver=driver,
            node=node,
            cdi_dir=cdi_dir,
            checkpoint_path=os.path.join(plugin_dir, "checkpoint.json"),
            read_claim=ClaimReaderApi(api),
            write_status=ClaimStatusApi(api, driver=driver, timeout=REQUEST_TIMEOUT_S),
        )
        self.plugin = KubeletPlugin(
            self.preparer,
            driver=driver,
            plugin_dir=plugin_dir,
            registry_dir=registry_dir,
            health=self.health_stream,
            metrics=self.dra_metrics,
            instance=instance,
        )
        self.rediscovery = (
            Rediscovery(
                inventory, self.health, rediscover, interval=rediscover_interval, watch_interval=poll_interval
            )
            if rediscover is not None and rediscover_interval > 0
            else None
        )
        self._done = threading.Event()
        self._stopped = False

    def start(self) -> None:
        # One health source for all that reports it: slices (taints), kubelet's health
        # stream, Node events and the metrics.
        self.health.subscribe(lambda _state, _changes: self.slices.wake())
        self.health.subscribe(self.health_stream.changed)
        self.health.subscribe(self.health_metrics.changed)
        if self.events is not None:
            self.events.start()
            self.health.subscribe(self.events.changed)
        self.health.start()
        self.slices.start()
        self.plugin.start()
        if self.rediscovery is not None:
            self.rediscovery.start()

    def stop(self) -> None:
        """Stop serving (slices and prepared claims stay: pods keep their devices)."""
        if self._stopped:
            return
        self._stopped = True
        if self.rediscovery is not None:
            self.rediscovery.stop()
        self.plugin.stop()
        self.preparer.close()
        self.slices.stop()
        self.health.stop()
        if self.events is not None:
            self.events.stop()
        close_states(self.inventory.states)
        self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)
