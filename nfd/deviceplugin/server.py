"""One resource's gRPC server on its own unix socket, and its registration with kubelet."""

from __future__ import annotations

import enum
import logging
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import grpc

from nfd.deviceplugin.api.v1beta1 import api_pb2 as pb
from nfd.deviceplugin.api.v1beta1 import api_pb2_grpc as pb_grpc
from nfd.deviceplugin.preferred import preferred_allocation
from nfd.devices.inventory import AllocationError, DeviceStatus, ResourceState
from nfd.devices.kinds.model import HEALTHY, UNHEALTHY
from nfd.unixgrpc import SocketServer

if TYPE_CHECKING:
    from nfd.deviceplugin.metrics import DevicePluginMetrics

log = logging.getLogger("nfd.deviceplugin")

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
# A stream re-checks whether it should end at least this often.
_STREAM_TICK = 0.5


def socket_name(resource: str) -> str:
    return "nfd-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in resource) + ".sock"


def _device(d: DeviceStatus) -> pb.Device:
    topo = pb.TopologyInfo(nodes=[pb.NUMANode(ID=d.numa_node)]) if d.numa_node is not None else None
    return pb.Device(ID=d.id, health=HEALTHY if d.healthy else UNHEALTHY, topology=topo)


class DevicePluginService(pb_grpc.DevicePluginServicer):
    """The DevicePlugin service of one resource."""

    def __init__(self, state: ResourceState, metrics: DevicePluginMetrics | None = None) -> None:
        self.state = state
        self.metrics = metrics
        self._stopped = threading.Event()

    def _count(self, operation: str) -> None:
        if self.metrics is not None:
            self.metrics.request(self.state.name, operation)

    def _refuse(self, context: grpc.ServicerContext, operation: str, e: AllocationError) -> None:
        log.warning("%s refused: %s", operation, e)
        if self.metrics is not None:
            self.metrics.error(self.state.name, operation, e.code)
        context.abort(getattr(grpc.StatusCode, e.code), str(e))

    def stop(self) -> None:
        self._stopped.set()
        self.state.kick()

    def options(self) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(
            pre_start_required=self.state.res.pre_start_check, get_preferred_allocation_available=True
        )

    def GetDevicePluginOptions(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> pb.DevicePluginOptions:
        return self.options()

    def ListAndWatch(
        self, request: pb.Empty, context: grpc.ServicerContext
    ) -> Iterator[pb.ListAndWatchResponse]:
        self._count("list_and_watch")
        seen = -1
        while not self._stopped.is_set() and not self.state.closed and context.is_active():
            version, devices = self.state.snapshot()
            if version != seen:
                seen = version
                yield pb.ListAndWatchResponse(devices=[_device(d) for d in devices])
            self.state.wait_change(seen, _STREAM_TICK)

    def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> pb.PreferredAllocationResponse:
        self._count("get_preferred_allocation")
        resp = pb.PreferredAllocationResponse()
        for creq in request.container_requests:
            ids = preferred_allocation(
                list(creq.available_deviceIDs),
                list(creq.must_include_deviceIDs),
                creq.allocation_size,
                numa_of=self.state.numa_of,
                physical_of=self.state.physical_of,
            )
            resp.container_responses.add(deviceIDs=ids)
        return resp

    def Allocate(self, request: pb.AllocateRequest, context: grpc.ServicerContext) -> pb.AllocateResponse:
        self._count("allocate")
        resp = pb.AllocateResponse()
        for creq in request.container_requests:
            try:
                edits = self.state.allocate(list(creq.devices_ids))
            except AllocationError as e:
                self._refuse(context, "allocate", e)
            if self.metrics is not None:
                self.metrics.allocated(self.state.name, len(creq.devices_ids))
            c = resp.container_responses.add()
            c.envs.update(edits.envs)
            for n in edits.devices:
                c.devices.add(
                    container_path=n.container_path, host_path=n.host_path, permissions=n.permissions
                )
            for m in edits.mounts:
                c.mounts.add(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for name in edits.cdi_devices:
                c.cdi_devices.add(name=name)
        return resp

    def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> pb.PreStartContainerResponse:
        self._count("pre_start_container")
        try:
            self.state.pre_start(list(request.devices_ids))
        except AllocationError as e:
            self._refuse(context, "pre_start_container", e)
        return pb.PreStartContainerResponse()


class Outcome(enum.Enum):
    REGISTERED = "registered"
    RETRY = "retry"  # kubelet not (yet) answering
    REJECTED = "rejected"  # kubelet answered no: stop this resource


class ResourcePlugin:
    """Serves one resource on ``<plugin_dir>/nfd-<resource>.sock`` and registers it."""

    def __init__(
        self,
        state: ResourceState,
        plugin_dir: str,
        *,
        workers: int = 8,
        metrics: DevicePluginMetrics | None = None,
    ) -> None:
        self.state = state
        self.metrics = metrics
        self.plugin_dir = plugin_dir
        self.socket = os.path.join(plugin_dir, socket_name(state.name))
        self._service: DevicePluginService | None = None
        self._server = SocketServer(self.socket, self._add, workers=workers, name="nfd-dp")

    @property
    def name(self) -> str:
        return self.state.name

    def _add(self, server: grpc.Server) -> None:
        self._service = DevicePluginService(self.state, self.metrics)
        pb_grpc.add_DevicePluginServicer_to_server(self._service, server)

    def serve(self) -> None:
        """(Re)start the server on a fresh socket file; OSError when it cannot listen."""
        self.stop()
        self._server.serve()

    def serving(self) -> bool:
        return self._server.serving()

    def stop(self) -> None:
        if self._service is not None:
            self._service.stop()  # its ListAndWatch streams end
        self._server.stop()
        self._service = None

    def register(self, *, timeout: float = 5.0) -> tuple[Outcome, str]:
        kubelet = os.path.join(self.plugin_dir, KUBELET_SOCKET)
        options = self._service.options() if self._service else DevicePluginService(self.state).options()
        req = pb.RegisterRequest(
            version=API_VERSION,
            endpoint=os.path.basename(self.socket),
            resource_name=self.name,
            options=options,
        )
        with grpc.insecure_channel("unix:" + kubelet) as channel:
            try:
                pb_grpc.RegistrationStub(channel).Register(req, timeout=timeout)
            except grpc.RpcError as e:
                code = e.code() if isinstance(e, grpc.Call) else None
                detail = (e.details() if isinstance(e, grpc.Call) else None) or str(e)
                # Not there, too slow, or going away mid-call: kubelet did not say no.
                if code in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    grpc.StatusCode.CANCELLED,
                ):
                    return Outcome.RETRY, detail
                return Outcome.REJECTED, f"{code.name if code else 'error'}: {detail}"
        return Outcome.REGISTERED, ""
