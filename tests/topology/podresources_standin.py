"""kubelet's PodResources service (v1) for tests and benchmarks: the real gRPC service on
a real unix socket, answering whatever ``allocatable`` and ``pods`` hold now (tests change
them between passes) and counting the calls; ``hold`` makes the calls wait, as a stuck
kubelet."""

from __future__ import annotations

import tempfile
import threading
from concurrent import futures
from pathlib import Path

import grpc

from nfd.topology.api.v1 import api_pb2 as pb
from nfd.topology.api.v1 import api_pb2_grpc as pb_grpc


class _Lister(pb_grpc.PodResourcesListerServicer):
    def __init__(self, owner: PodResourcesStandIn) -> None:
        self.owner = owner

    def List(
        self, request: pb.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> pb.ListPodResourcesResponse:
        self.owner.calls["List"] += 1
        self.owner.held()
        return self.owner.pods

    def GetAllocatableResources(
        self, request: pb.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> pb.AllocatableResourcesResponse:
        self.owner.calls["GetAllocatableResources"] += 1
        self.owner.held()
        return self.owner.allocatable


class PodResourcesStandIn:
    def __init__(
        self,
        socket: str | Path,
        *,
        allocatable: pb.AllocatableResourcesResponse | None = None,
        pods: pb.ListPodResourcesResponse | None = None,
    ) -> None:
        self.socket = Path(socket)
        self.allocatable = allocatable or pb.AllocatableResourcesResponse()
        self.pods = pods or pb.ListPodResourcesResponse()
        self.calls = {"List": 0, "GetAllocatableResources": 0}
        self.hold: threading.Event | None = None  # set: each call waits for it, as a stuck kubelet
        self._server: grpc.Server | None = None

    def held(self) -> None:
        if self.hold is not None:
            self.hold.wait(60)

    def start(self) -> PodResourcesStandIn:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb_grpc.add_PodResourcesListerServicer_to_server(_Lister(self), server)
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None
        self.socket.unlink(missing_ok=True)

    def __enter__(self) -> PodResourcesStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def short_tmpdir() -> str:
    """unix socket paths are limited to 107 bytes: keep test directories short."""
    return tempfile.mkdtemp(prefix="nfdtopo-", dir="/tmp")
