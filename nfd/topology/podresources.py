"""kubelet's PodResources API (v1) over its unix socket.

kubelet serves it on ``/var/lib/kubelet/pod-resources/kubelet.sock`` and re-creates the
socket when it restarts. Each read connects anew and closes its channel after: between
passes gRPC's core shuts down with its event-engine and timer threads (2.5 MiB of RSS),
and a unix socket connects in well under a millisecond. While they run, those threads
allocate: the overlay sets ``MALLOC_ARENA_MAX=2`` (read by glibc) so that they do not
each keep a malloc arena of their own after they end. While the socket is missing,
kubelet does not answer or its answer does not decode, :meth:`PodResources.read` returns
None and logs one line, then nothing until kubelet answers again (which it logs too).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

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
        self._cancelled = False
        self._call: grpc.Future[Any] | None = None  # the call under way

    def _fail(self, reason: str) -> None:
        if self._waiting is None:
            log.warning("waiting for kubelet's PodResources API at %s: %s; retrying", self.socket, reason)
        self._waiting = reason

    def cancel(self) -> None:
        """End the call under way (its read answers None) and every later read: the
        updater is stopping, and a kubelet that does not answer must not hold it until
        the timeout. Called from another thread than the read's."""
        self._cancelled = True
        call = self._call
        if call is not None:
            call.cancel()

    def read(self) -> Snapshot | None:
        if self._cancelled:
            return None
        if not os.path.exists(self.socket):
            self._fail("no such socket (is the kubelet pod-resources directory mounted?)")
            return None
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE)]
        try:
            with grpc.insecure_channel(f"unix:{self.socket}", options=options) as channel:
                raw_allocatable, raw_pods = (
                    self._ask(channel, m) for m in (messages.GET_ALLOCATABLE, messages.LIST)
                )
        except grpc.FutureCancelledError:
            return None
        except grpc.RpcError as e:
            if self._cancelled:  # cancelled as the answer failed anyway
                return None
            code = e.code() if isinstance(e, grpc.Call) else None
            detail = e.details() if isinstance(e, grpc.Call) else str(e)
            self._fail(f"{code.name if code else 'error'}: {detail}")
            return None
        # Decoded here, not as gRPC's response deserializer: gRPC would log a traceback
        # each pass and answer only "Exception deserializing response!".
        try:
            allocatable, pods = messages.decode_allocatable(raw_allocatable), messages.decode_list(raw_pods)
        except messages.DecodeError as e:
            self._fail(f"a malformed answer: {e}")
            return None
        if self._waiting is not None:
            log.warning("kubelet's PodResources API at %s answers again", self.socket)
            self._waiting = None
        return Snapshot(allocatable, pods)

    def _ask(self, channel: grpc.Channel, method: str) -> bytes:
        call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        future: grpc.Future[bytes] = call.future(_EMPTY, timeout=self.timeout)
        self._call = future
        try:
            if self._cancelled:  # cancel() came before the call was there to cancel
                future.cancel()
            return future.result()
        finally:
            self._call = None
