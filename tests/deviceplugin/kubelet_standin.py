"""A kubelet stand-in for device-plugin tests and benchmarks.

It serves the real ``v1beta1.Registration`` service on ``<dir>/kubelet.sock`` over a real
unix socket, records every RegisterRequest, can refuse chosen resources the way kubelet
does (a gRPC error), and can "restart" like kubelet: delete every socket in the
directory, then listen on a new kubelet.sock. ``client()`` talks to a plugin's socket.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from nfd.deviceplugin.api.v1beta1 import api_pb2 as pb
from nfd.deviceplugin.api.v1beta1 import api_pb2_grpc as pb_grpc


class _Registration(pb_grpc.RegistrationServicer):
    def __init__(self, owner: KubeletStandIn) -> None:
        self.owner = owner

    def Register(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.Empty:
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported API version {request.version}")
        if request.resource_name in self.owner.refuse:
            context.abort(grpc.StatusCode.UNKNOWN, f"resource {request.resource_name} is taken")
        self.owner.requests.put((time.perf_counter(), request))
        return pb.Empty()


class KubeletStandIn:
    def __init__(self, plugin_dir: str | Path, *, refuse: set[str] | None = None) -> None:
        self.dir = Path(plugin_dir)
        self.socket = self.dir / "kubelet.sock"
        self.refuse = set(refuse or ())
        self.requests: queue.Queue[tuple[float, pb.RegisterRequest]] = queue.Queue()
        self._server: grpc.Server | None = None

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_RegistrationServicer_to_server(_Registration(self), server)
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None
        self.socket.unlink(missing_ok=True)

    def restart(self) -> float:
        """Like a restarting kubelet: drop every socket, then serve a new kubelet.sock.
        Returns the perf_counter time at which the new socket exists."""
        self.stop()
        for sock in self.dir.glob("*.sock"):
            sock.unlink(missing_ok=True)
        self.start()
        return time.perf_counter()

    def next_registration(self, timeout: float = 5.0) -> tuple[float, pb.RegisterRequest]:
        return self.requests.get(timeout=timeout)

    def registered(self, timeout: float = 5.0) -> pb.RegisterRequest:
        return self.next_registration(timeout)[1]

    def client(self, endpoint: str) -> PluginClient:
        return PluginClient(self.dir / endpoint)


class PluginClient:
    """kubelet's side of one plugin's DevicePlugin service."""

    def __init__(self, socket: str | Path) -> None:
        self.channel = grpc.insecure_channel(f"unix:{socket}")
        self.stub = pb_grpc.DevicePluginStub(self.channel)

    def __enter__(self) -> PluginClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def options(self) -> pb.DevicePluginOptions:
        return self.stub.GetDevicePluginOptions(pb.Empty(), timeout=5)

    def allocate(self, *containers: list[str]) -> pb.AllocateResponse:
        req = pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=c) for c in containers]
        )
        return self.stub.Allocate(req, timeout=5)

    def preferred(self, available: list[str], must: list[str], size: int) -> list[str]:
        req = pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                )
            ]
        )
        return list(self.stub.GetPreferredAllocation(req, timeout=5).container_responses[0].deviceIDs)

    def pre_start(self, ids: list[str]) -> pb.PreStartContainerResponse:
        return self.stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=ids), timeout=5)

    def watch(self) -> Watch:
        return Watch(self.stub.ListAndWatch(pb.Empty()))


class Watch:
    """A ListAndWatch stream read by a background thread; snapshots land in a queue."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.snapshots: queue.Queue[tuple[float, dict[str, str]]] = queue.Queue()
        self.raw: queue.Queue[pb.ListAndWatchResponse] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for msg in self.stream:
                self.raw.put(msg)
                self.snapshots.put((time.perf_counter(), {d.ID: d.health for d in msg.devices}))
        except grpc.RpcError:
            pass

    def until(
        self, pred: Callable[[dict[str, str]], bool], timeout: float = 5.0
    ) -> tuple[float, dict[str, str]]:
        """The first snapshot (from now on) satisfying ``pred``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no matching ListAndWatch snapshot")
            try:
                at, snap = self.snapshots.get(timeout=left)
            except queue.Empty:
                raise TimeoutError("no matching ListAndWatch snapshot") from None
            if pred(snap):
                return at, snap

    def cancel(self) -> None:
        self.stream.cancel()


def wait_for(cond: Callable[[], bool], timeout: float = 5.0, interval: float = 0.01) -> bool:
    """Poll ``cond`` until true or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return cond()


def short_tmpdir() -> str:
    """unix socket paths are limited to 107 bytes: keep test directories short."""
    import tempfile

    return tempfile.mkdtemp(prefix="nfddp-", dir="/tmp")


__all__ = ["KubeletStandIn", "PluginClient", "Watch", "short_tmpdir", "wait_for"]
