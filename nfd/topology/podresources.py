"""kubelet's PodResources API (v1) over its unix socket.

kubelet serves it on ``/var/lib/kubelet/pod-resources/kubelet.sock`` and re-creates the
socket when it restarts. Each read connects anew and closes its channel after: between
passes gRPC's core shuts down with its event-engine and timer threads (2.5 MiB of RSS),
and a unix socket connects in well under a millisecond. While they run, those threads
allocate: the overlay sets ``MALLOC_ARENA_MAX=2`` (read by glibc) so that they do not
each keep a malloc arena of their own after they end. While the socket is missing or
kubelet does not answer, :meth:`PodResources.read` returns None and logs one line, then
nothing until kubelet answers again (which it logs too).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import grpc

from nfd.topology import messages

log = logging.getLogger("nfd.topology")

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
# kubelet limits PodResources answers to 16 MiB; so do we, above gRPC's 4 MiB default.
_MAX_MESSAGE = 16 * 1024 * 1024
_EMPTY = b""  # both requests are empty messages


@dataclass(frozen=True)
class Snapshot:
    allocatable: messages.AllocatableResourcesResponse
    pods: messages.ListPodResourcesResponse


class PodResources:
    def __init__(self, socket: str = DEFAULT_SOCKET, *, timeout: float = 10.0) -> None:
        self.socket = socket
        self.timeout = timeout
        self._waiting: str | None = None  # why the last read failed (logged once)

    def _fail(self, reason: str) -> None:
        if self._waiting is None:
            log.warning("waiting for kubelet's PodResources API at %s: %s; retrying", self.socket, reason)
        self._waiting = reason

    def read(self) -> Snapshot | None:
        if not os.path.exists(self.socket):
            self._fail("no such socket (is the kubelet pod-resources directory mounted?)")
            return None
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE)]
        try:
            with grpc.insecure_channel(f"unix:{self.socket}", options=options) as channel:
                allocatable = channel.unary_unary(
                    messages.GET_ALLOCATABLE, request_serializer=None, response_deserializer=messages.decode_allocatable
                )(_EMPTY, timeout=self.timeout)
                pods = channel.unary_unary(
                    messages.LIST, request_serializer=None, response_deserializer=messages.decode_list
                )(_EMPTY, timeout=self.timeout)
        except grpc.RpcError as e:
            code = e.code() if isinstance(e, grpc.Call) else None
            detail = e.details() if isinstance(e, grpc.Call) else str(e)
            self._fail(f"{code.name if code else 'error'}: {detail}")
            return None
        if self._waiting is not None:
            log.warning("kubelet's PodResources API at %s answers again", self.socket)
            self._waiting = None
        return Snapshot(allocatable, pods)
