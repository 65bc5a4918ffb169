"""kubelet's DRA health stream (``DRAResourceHealth.NodeWatchResources``), served on the
DRA plugin's socket.

kubelet opens one stream and keeps it. On connect it gets every device's health; then a
new full report each time a device's health changes (the health monitor calls
:meth:`HealthService.changed`), and at least every ``resend`` seconds, so that kubelet,
which turns a device it has not heard of for a while to Unknown, keeps it known. A
device's time is when its health was last checked: the monitor re-checks every poll.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence

import grpc

from nfd.devices.inventory import ResourceState
from nfd.devices.kinds.model import HealthChange
from nfd.dra.api.drahealth.v1alpha1 import api_pb2 as pb
from nfd.dra.api.drahealth.v1alpha1 import api_pb2_grpc as pb_grpc
from nfd.dra.slices import DraInventory

log = logging.getLogger("nfd.dra")

RESEND_S = 10.0
MAX_MESSAGE = 1024  # what kubelet keeps of a message


def _message(reason: str) -> str:
    return reason if len(reason) <= MAX_MESSAGE else reason[: MAX_MESSAGE - 3] + "..."


class HealthService(pb_grpc.DRAResourceHealthServicer):
    def __init__(self, inventory: DraInventory, *, pool: str, resend: float = RESEND_S) -> None:
        self.inventory = inventory
        self.pool = pool
        self.resend = resend
        self._cond = threading.Condition()
        self._changes = 0
        self._closed = False
        self.streams = 0  # open now (tests)

    def changed(self, _state: ResourceState | None = None, _changes: Sequence[HealthChange] = ()) -> None:
        """A health listener: every open stream sends a new report."""
        with self._cond:
            self._changes += 1
            self._cond.notify_all()

    def close(self) -> None:
        """End every stream (the plugin is stopping)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def report(self) -> pb.NodeWatchResourcesResponse:
        now = int(time.time())
        resp = pb.NodeWatchResourcesResponse()
        for name, reason in self.inventory.health():
            resp.devices.add(
                device=pb.DeviceIdentifier(pool_name=self.pool, device_name=name),
                health=pb.HEALTHY if reason is None else pb.UNHEALTHY,
                last_updated_time=now,
                message="" if reason is None else _message(reason),
            )
        return resp

    def _wait(self, seen: int) -> int:
        """Until a change after ``seen``, close, or ``resend`` seconds; the changes now."""
        with self._cond:
            self._cond.wait_for(lambda: self._changes != seen or self._closed, self.resend)
            return self._changes

    def NodeWatchResources(
        self, request: pb.NodeWatchResourcesRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.NodeWatchResourcesResponse]:
        # Wake at once when kubelet goes away, not at the next resend.
        context.add_callback(self.changed)
        with self._cond:
            self.streams += 1
            seen = self._changes
        log.info("kubelet watches device health")
        try:
            while context.is_active() and not self._closed:
                yield self.report()
                seen = self._wait(seen)
        finally:
            with self._cond:
                self.streams -= 1
