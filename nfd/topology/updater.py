"""The updater's loop: read PodResources, the NUMA layout and the kubelet's policy, count
per zone, write the NodeResourceTopology object when it changed.

A pass runs every ``interval`` seconds, and at once when :meth:`Updater.nudge` is called
(a pod on the node started or ended), except that a write never follows the previous
write within ``interval``: a nudge that comes sooner is served when the interval is up,
with whatever else changed meanwhile folded into that one pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nfd.backoff import Backoff
from nfd.hostroot import HostRoot
from nfd.loopthread import LoopThread
from nfd.topology import kubeletconfig, nrt
from nfd.topology.accounting import IsExclusive, account
from nfd.topology.layout import read_layout
from nfd.topology.podresources import PodResources

log = logging.getLogger("nfd.topology")


@dataclass(frozen=True)
class Settings:
    node_name: str
    host: HostRoot
    socket: str
    kubelet_config: str | None  # None: policy unknown, attributes left out
    interval: float = 10.0
    exclude: frozenset[str] = frozenset()  # resources left out of the object (excludeList)


class Updater:
    def __init__(
        self,
        settings: Settings,
        *,
        publish: Callable[[dict[str, Any]], bool],
        is_exclusive: IsExclusive | None = None,
        node_uid: Callable[[], str | None] = lambda: None,
        requested: Callable[[], Mapping[str, int]] | None = None,
        on_scan_error: Callable[[], None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.publish = publish
        self.is_exclusive = is_exclusive
        self.requested = requested  # what the running pods request; None: pods not known
        self.node_uid = node_uid
        self.on_scan_error = on_scan_error  # a pass that could not read kubelet's allocation
        self.podresources = PodResources(settings.socket)
        self._uid: str | None = None
        self._said: set[str] = set()  # warnings already logged (each once while it lasts)
        self._stopped = threading.Event()
        self._last_write = -settings.interval
        # A failed pass (a bug: kubelet away is not an exception) waits at least as long
        # as a good one.
        backoff = Backoff(initial=settings.interval, cap=max(60.0, settings.interval), jitter=0)
        self._loop = LoopThread(
            "nfd-topology",
            self._round,
            interval=settings.interval,
            backoff=backoff,
            on_stop=self.podresources.cancel,
            logger=log,
        )
        self.passes = 0
        self.last: dict[str, Any] | None = None

    def nudge(self) -> None:
        self._loop.wake()

    def stop(self) -> None:
        """End run() at once, a call to kubelet under way too (from another thread)."""
        self._stopped.set()
        self._loop.stop()

    def _policy(self) -> tuple[kubeletconfig.TopologyPolicy | None, list[str]]:
        if self.settings.kubelet_config is None:
            return None, []
        try:
            return kubeletconfig.load(self.settings.kubelet_config), []
        except kubeletconfig.PolicyError as e:
            return None, [f"{e}; publishing without the Topology Manager attributes"]

    def _say(self, warnings: list[str]) -> None:
        """Logs each warning once while it lasts (a pass every 10 s must not repeat it)."""
        for w in warnings:
            if w not in self._said:
                log.warning("%s", w)
        self._said = set(warnings)

    def compute(self) -> dict[str, Any] | None:
        """The object as it should be now; None while kubelet does not answer."""
        snap = self.podresources.read()
        if snap is None:
            return None
        layout = read_layout(self.settings.host)
        result = account(
            layout,
            snap.allocatable,
            snap.pods,
            is_exclusive=self.is_exclusive,
            requested=None if self.requested is None else self.requested(),
        )
        policy, policy_warnings = self._policy()
        if self._uid is None:
            self._uid = self.node_uid()
        obj = nrt.build(
            self.settings.node_name,
            zones=result.zones,
            layout=layout,
            policy=policy,
            node_uid=self._uid,
            exclude=self.settings.exclude,
        )
        self._say(policy_warnings + result.warnings)
        return obj

    def run_once(self) -> bool:
        """One pass; True when it wrote."""
        self.passes += 1
        try:
            obj = self.compute()
        except Exception:
            self.on_scan_error()
            raise
        if obj is None:
            self.on_scan_error()
            return False
        self.last = obj
        try:
            return self.publish(obj)
        except Exception as e:  # the API server may be away: the next pass tries again
            log.warning("%s", e)
            return False

    def run(self) -> None:
        """Passes until :meth:`stop`."""
        if self._stopped.is_set():
            return
        self._loop.start()
        self._stopped.wait()
        self._loop.stop()

    def _round(self) -> float:
        hold = self._last_write + self.settings.interval - time.monotonic()
        if hold > 0:  # nudged sooner than an interval after the last write
            return hold
        if self.run_once():
            self._last_write = time.monotonic()
        return self.settings.interval
