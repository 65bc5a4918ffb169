"""Kubernetes Events on this node for device health: ``DeviceUnhealthy`` (Warning) when
a device turns unhealthy, ``DeviceHealthy`` (Normal) when it is healthy again.

A health listener only queues; one thread posts, so a slow or absent API server never
holds up the thread that saw the change. Events are best effort: a failed post is
logged and dropped, and a 403 (no right to create Events) stops posting, said once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

from nfd.devices.inventory import ResourceState
from nfd.devices.kinds.model import HealthChange
from nfd.dra.resourceapi import api_failure
from nfd.dra.slices import device_name, rfc3339
from nfd.kube.errors import ApiError, Forbidden
from nfd.kube.transport import Transport, path

log = logging.getLogger("nfd.dra")

COMPONENT = "nfd-dra"
NAMESPACE = "default"  # where kubelet files a Node's events too
MAX_QUEUED = 1000
REQUEST_TIMEOUT_S = 10.0


def node_event(node: str, change: HealthChange) -> dict[str, Any]:
    healthy = change.reason is None
    name = device_name(change.resource, change.device)
    what = f"{change.resource} device {change.device} (DRA device {name})"
    stamp = rfc3339(change.at)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # As client-go names events: the object's name and a unique hex suffix.
        "metadata": {"name": f"{node}.{time.time_ns():x}", "namespace": NAMESPACE},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node},
        "reason": "DeviceHealthy" if healthy else "DeviceUnhealthy",
        "message": f"{what} is healthy again" if healthy else f"{what} is unhealthy: {change.reason}",
        "type": "Normal" if healthy else "Warning",
        "source": {"component": COMPONENT, "host": node},
        "reportingComponent": COMPONENT,
        "reportingInstance": node,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class NodeEvents:
    def __init__(self, api: Transport, *, node: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.api = api
        self.node = node
        self.timeout = timeout
        self.posted = 0
        self._queue: queue.Queue[HealthChange | None] = queue.Queue(MAX_QUEUED)
        self._forbidden = False
        self._thread: threading.Thread | None = None

    def changed(self, _state: ResourceState, changes: Sequence[HealthChange]) -> None:
        """A health listener."""
        for c in changes:
            try:
                self._queue.put_nowait(c)
            except queue.Full:  # the API server is far behind: these are best effort
                log.debug("event queue full; dropped the event for %s", c.device)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="nfd-dra-events", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 1)

    def _loop(self) -> None:
        while (change := self._queue.get()) is not None:
            if not self._forbidden:
                self._post(change)

    def _post(self, change: HealthChange) -> None:
        try:
            self.api.request(
                "POST",
                path("api", "v1", "namespaces", NAMESPACE, "events"),
                body=node_event(self.node, change),
                timeout=self.timeout,
            )
            self.posted += 1
        except Forbidden:
            self._forbidden = True
            log.warning(
                "may not create Events (HTTP 403); device health is not reported as Node events"
                " (grant create on events to post them)"
            )
        except ApiError as e:
            log.warning("Event for device %s: %s", change.device, api_failure(e))
