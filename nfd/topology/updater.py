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

from nfd.hostroot import HostRoot
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
        self._nudged = threading.Event()
        self._stop = threading.Event()
        self.passes = 0
        self.last: dict[str, Any] | None = None

    def nudge(self) -> None:
        self._nudged.set()

    def stop(self) -> None:
        """End run() at once, a call to kubelet under way too (from another thread)."""
        self._stop.set()
        self._nudged.set()
        self.podresources.cancel()

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
        interval = self.settings.interval
        last_write = -interval
        while not self._stop.is_set():
            self._nudged.clear()
            try:
                if self.run_once():
                    last_write = time.monotonic()
            except Exception:  # a bug in one pass must not end the agent: log it, go on
                log.exception("topology pass failed")
            self._nudged.wait(interval)
            if self._stop.is_set():
                break
            hold = last_write + interval - time.monotonic()
            if hold > 0:
                self._stop.wait(hold)
