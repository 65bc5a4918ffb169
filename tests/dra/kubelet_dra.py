"""A kubelet stand-in for DRA tests and benchmarks, over real unix sockets.

Like kubelet's plugin watcher it looks at the ``plugins_registry`` directory, and for
every new socket file (a re-created one counts as new) calls GetInfo, checks the answer,
and reports the outcome with NotifyRegistrationStatus. Like kubelet 1.33+, it keeps every
registered instance of a driver (a rolling update's old and new pod), calls the one that
registered last, and forgets an instance when its registration socket is removed. Then it calls the plugin's
NodePrepareResources / NodeUnprepareResources on the endpoint GetInfo named, and opens
the DRAResourceHealth stream there as kubelet does.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from nfd.dra.api.dra.v1 import api_pb2 as dra_pb
from nfd.dra.api.dra.v1 import api_pb2_grpc as dra_grpc
from nfd.dra.api.drahealth.v1alpha1 import api_pb2 as health_pb
from nfd.dra.api.drahealth.v1alpha1 import api_pb2_grpc as health_grpc
from nfd.dra.api.pluginregistration.v1 import api_pb2 as reg_pb
from nfd.dra.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc

Claim = tuple[str, str, str]  # namespace, uid, name


class DraKubelet:
    def __init__(self, registry_dir: str | Path, *, interval: float = 0.02) -> None:
        self.dir = Path(registry_dir)
        self.interval = interval
        self.drivers: dict[str, str] = {}  # driver name -> the DRA endpoint it calls
        # Registration socket name -> (driver, DRA endpoint), in registration order.
        self.instances: dict[str, tuple[str, str]] = {}
        self.registrations: list[str] = []
        self.refusals: list[str] = []
        self._seen: dict[str, tuple[int, int, int]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._channels: dict[str, grpc.Channel] = {}

    def start(self) -> DraKubelet:
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for ch in self._channels.values():
            ch.close()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                names = os.listdir(self.dir)
            except OSError:
                continue
            for name in set(self.instances) - set(names):
                del self.instances[name]
                self._seen.pop(name, None)
                self._choose()
            for name in names:
                path = self.dir / name
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                ident = (st.st_dev, st.st_ino, st.st_ctime_ns)
                if not name.endswith(".sock") or self._seen.get(name) == ident:
                    continue
                self._seen[name] = ident
                self._register(path)

    def _register(self, path: Path) -> None:
        with grpc.insecure_channel(f"unix:{path}") as ch:
            stub = reg_grpc.RegistrationStub(ch)
            try:
                info = stub.GetInfo(reg_pb.InfoRequest(), timeout=5)
            except grpc.RpcError:
                return
            error = ""
            if info.type != "DRAPlugin":
                error = f"unknown plugin type {info.type}"
            elif "v1.DRAPlugin" not in info.supported_versions:
                error = f"no supported version in {list(info.supported_versions)}"
            elif not os.path.exists(info.endpoint):
                error = f"endpoint {info.endpoint} does not exist"
            stub.NotifyRegistrationStatus(
                reg_pb.RegistrationStatus(plugin_registered=not error, error=error), timeout=5
            )
            if error:
                self.refusals.append(error)
                return
            self.instances.pop(path.name, None)
            self.instances[path.name] = (info.name, info.endpoint)
            self._choose()
            self.registrations.append(info.name)

    def _choose(self) -> None:
        newest: dict[str, str] = {}
        for driver, endpoint in self.instances.values():
            newest[driver] = endpoint
        self.drivers = newest

    def _channel(self, driver: str) -> grpc.Channel:
        endpoint = self.drivers[driver]
        ch = self._channels.get(endpoint)
        if ch is None:
            ch = self._channels[endpoint] = grpc.insecure_channel(f"unix:{endpoint}")
        return ch

    def _stub(self, driver: str) -> dra_grpc.DRAPluginStub:
        return dra_grpc.DRAPluginStub(self._channel(driver))

    def watch_health(self, driver: str) -> HealthWatch:
        """The driver's health stream; its reports arrive in ``HealthWatch.reports``."""
        stream = health_grpc.DRAResourceHealthStub(self._channel(driver)).NodeWatchResources(
            health_pb.NodeWatchResourcesRequest(), timeout=60
        )
        return HealthWatch(stream)

    def prepare(self, driver: str, *claims: Claim) -> dra_pb.NodePrepareResourcesResponse:
        req = dra_pb.NodePrepareResourcesRequest(
            claims=[dra_pb.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in claims]
        )
        resp: dra_pb.NodePrepareResourcesResponse = self._stub(driver).NodePrepareResources(req, timeout=45)
        return resp

    def unprepare(self, driver: str, *claims: Claim) -> dra_pb.NodeUnprepareResourcesResponse:
        req = dra_pb.NodeUnprepareResourcesRequest(
            claims=[dra_pb.Claim(namespace=ns, uid=uid, name=name) for ns, uid, name in claims]
        )
        resp: dra_pb.NodeUnprepareResourcesResponse = self._stub(driver).NodeUnprepareResources(
            req, timeout=45
        )
        return resp


class HealthWatch:
    """Reads a health stream on a thread: ``reports`` holds each report as
    {device name: (health name, message)}."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.reports: list[dict[str, tuple[str, str]]] = []
        self.times: list[int] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for resp in self.stream:
                self.times.extend(d.last_updated_time for d in resp.devices)
                self.reports.append(
                    {
                        d.device.device_name: (health_pb.HealthStatus.Name(d.health), d.message)
                        for d in resp.devices
                    }
                )
        except grpc.RpcError:
            pass  # cancelled, or the plugin stopped

    def cancel(self) -> None:
        self.stream.cancel()
        self._thread.join(timeout=5)


def wait_for(cond: Callable[[], object], timeout: float = 5.0, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return bool(cond())
