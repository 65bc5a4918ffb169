"""The kubelet DRA plugin: the DRAPlugin service (and the DRAResourceHealth stream) on
``<plugin dir>/dra.sock``, and the registration service on a socket in kubelet's ``plugins_registry`` directory.

kubelet finds the registration socket, asks GetInfo, connects to the DRA socket and says
whether it took the plugin.

In a rolling update (kubelet 1.33+) the old and the new instance serve side by side, each
on sockets named with its pod's UID (``dra-<uid>.sock``, ``<driver>-<uid>-reg.sock``), as
kubernetes' kubeletplugin package names them: kubelet sends calls to the instance that
registered last, and to the other one again when that one's registration socket goes.
The two share the checkpoint (see :mod:`nfd.dra.checkpoint`). Stopping removes the
registration socket first and gives calls under way time to end, so that a prepare in
flight during the switch completes instead of failing. The supervisor the device plugin uses too
(:class:`nfd.unixgrpc.SocketSupervisor`) serves a socket again when its file is gone or
replaced (a re-created registry directory, a cleaned plugin directory): kubelet then
sees a new socket and registers the plugin again.
"""

from __future__ import annotations

import glob
import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

import grpc

from nfd.backoff import Backoff
from nfd.dra.api.dra.v1 import api_pb2 as dra_pb
from nfd.dra.api.dra.v1 import api_pb2_grpc as dra_grpc
from nfd.dra.api.drahealth.v1alpha1 import api_pb2_grpc as health_grpc
from nfd.dra.api.pluginregistration.v1 import api_pb2 as reg_pb
from nfd.dra.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from nfd.dra.health import HealthService
from nfd.dra.metrics import PREPARE, UNPREPARE, DraMetrics
from nfd.dra.prepare import ClaimError, Preparer
from nfd.promtext import Registry
from nfd.unixgrpc import SocketServer, SocketSupervisor, Watched, remove_stale

log = logging.getLogger("nfd.dra")

PLUGIN_TYPE = "DRAPlugin"
SUPPORTED_VERSIONS = ("v1.DRAPlugin",)
# How long calls under way may take to end when the plugin stops.
STOP_GRACE_S = 5.0


class DraService(dra_grpc.DRAPluginServicer):
    def __init__(self, preparer: Preparer, metrics: DraMetrics | None = None) -> None:
        self.preparer = preparer
        self.metrics = metrics or DraMetrics(Registry())
        self.metrics.prepared_devices(preparer.prepared_devices())

    def NodePrepareResources(
        self, request: dra_pb.NodePrepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra_pb.NodePrepareResourcesResponse:
        resp = dra_pb.NodePrepareResourcesResponse()

        def prepare(c: dra_pb.Claim, out: Any) -> None:
            for d in self.preparer.prepare(c.namespace, c.uid, c.name):
                out.devices.add(
                    request_names=d.request_names,
                    pool_name=d.pool_name,
                    device_name=d.device_name,
                    cdi_device_ids=d.cdi_device_ids,
                )

        _each_claim("NodePrepareResources", request.claims, resp.claims, prepare, self.metrics, PREPARE)
        self.metrics.prepared_devices(self.preparer.prepared_devices())
        return resp

    def NodeUnprepareResources(
        self, request: dra_pb.NodeUnprepareResourcesRequest, context: grpc.ServicerContext
    ) -> dra_pb.NodeUnprepareResourcesResponse:
        resp = dra_pb.NodeUnprepareResourcesResponse()
        _each_claim(
            "NodeUnprepareResources",
            request.claims,
            resp.claims,
            lambda c, _out: self.preparer.unprepare(c.namespace, c.uid, c.name),
            self.metrics,
            UNPREPARE,
        )
        self.metrics.prepared_devices(self.preparer.prepared_devices())
        return resp


def _each_claim(
    method: str,
    claims: Iterable[dra_pb.Claim],
    answers: Any,
    act: Callable[[dra_pb.Claim, Any], None],
    metrics: DraMetrics,
    operation: str,
) -> None:
    """``act`` on each claim and its answer (``answers[uid]``, which every claim gets); a
    claim that fails gets the error there, a bug too: it must cost that claim only."""
    for c in claims:
        out = answers[c.uid]
        try:
            with metrics.request(operation):
                act(c, out)
        except ClaimError as e:
            log.warning("%s: %s", method, e)
            out.error = str(e)
        except Exception as e:
            log.exception("%s: claim %s/%s", method, c.namespace, c.name)
            out.error = f"claim {c.namespace}/{c.name}: internal error: {type(e).__name__}: {e}"


class RegistrationService(reg_grpc.RegistrationServicer):
    def __init__(self, driver: str, endpoint: str, on_status: Callable[[bool, str], None]) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.on_status = on_status

    def GetInfo(self, request: reg_pb.InfoRequest, context: grpc.ServicerContext) -> reg_pb.PluginInfo:
        return reg_pb.PluginInfo(
            type=PLUGIN_TYPE, name=self.driver, endpoint=self.endpoint, supported_versions=SUPPORTED_VERSIONS
        )

    def NotifyRegistrationStatus(
        self, request: reg_pb.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg_pb.RegistrationStatusResponse:
        self.on_status(request.plugin_registered, request.error)
        return reg_pb.RegistrationStatusResponse()


def instance_error(uid: str) -> str | None:
    """Why ``uid`` cannot name our sockets (None: it can, or it is empty)."""
    if uid and not (len(uid) <= 64 and all(c.isascii() and (c.isalnum() or c == "-") for c in uid)):
        return f"pod UID {uid!r}: expected letters, digits and '-' (at most 64), as a UID has"
    return None


class KubeletPlugin:
    def __init__(
        self,
        preparer: Preparer,
        *,
        driver: str,
        plugin_dir: str,
        registry_dir: str,
        health: HealthService | None = None,
        metrics: DraMetrics | None = None,
        instance: str = "",
        watch_interval: float = 0.1,
        workers: int = 8,
        stop_grace: float = STOP_GRACE_S,
    ) -> None:
        """``instance``: this pod's UID, for rolling updates (empty: sockets without it)."""
        if instance and not (
            len(instance) <= 64 and all(c.isascii() and (c.isalnum() or c == "-") for c in instance)
        ):
            raise ValueError(
                f"pod UID {instance!r}: expected letters, digits and '-' (at most 64), as a UID has"
            )
        self.driver = driver
        part = f"-{instance}" if instance else ""
        self.dra_socket = os.path.join(plugin_dir, f"dra{part}.sock")
        self.registry_socket = os.path.join(registry_dir, f"{driver}{part}-reg.sock")
        mine = os.path.join(glob.escape(registry_dir), glob.escape(driver))
        self._stale = (
            os.path.join(glob.escape(plugin_dir), "dra*.sock"),
            f"{mine}-reg.sock",
            f"{mine}-*-reg.sock",
        )
        self.stop_grace = stop_grace
        self.service = DraService(preparer, metrics)
        self.registered = threading.Event()
        self.registrations = 0
        self.last_error = ""
        self.health = health

        def services(server: grpc.Server) -> None:
            dra_grpc.add_DRAPluginServicer_to_server(self.service, server)
            if health is not None:
                health_grpc.add_DRAResourceHealthServicer_to_server(health, server)

        self._dra = SocketServer(
            self.dra_socket,
            services,
            workers=workers,
            name="nfd-dra",
            make_dir=True,
        )
        reg = RegistrationService(driver, self.dra_socket, self._on_status)
        self._reg = SocketServer(
            self.registry_socket,
            lambda s: reg_grpc.add_RegistrationServicer_to_server(reg, s),
            workers=2,
            name="nfd-dra",
            make_dir=True,
        )
        self.watch_interval = watch_interval
        self._supervisor = SocketSupervisor(
            self._round, interval=watch_interval, name="nfd-dra-sockets", log=log
        )
        # Exact steps: one plugin and its own kubelet.
        self._watched = [
            Watched(
                self._dra, f"DRA socket {self.dra_socket}", Backoff(initial=watch_interval, cap=5.0, jitter=0)
            ),
            Watched(
                self._reg,
                f"registration socket {self.registry_socket}",
                Backoff(initial=watch_interval, cap=5.0, jitter=0),
                on_gone=self.registered.clear,
            ),
        ]

    def _on_status(self, registered: bool, error: str) -> None:
        if registered:
            self.registrations += 1
            self.last_error = ""
            self.registered.set()
            log.info("registered with kubelet as %s", self.driver)
        else:
            self.last_error = error
            self.registered.clear()
            log.error("kubelet did not register %s: %s", self.driver, error or "no reason given")

    def start(self) -> None:
        # An instance killed without its clean-up leaves its sockets; kubelet would keep
        # trying the dead registration socket.
        for path in remove_stale(p for pattern in self._stale for p in sorted(glob.glob(pattern))):
            log.info("removed stale socket %s (nothing listens on it)", path)
        self._dra.serve()
        self._reg.serve()
        log.info(
            "DRA plugin %s: serving %s, registration on %s",
            self.driver,
            self.dra_socket,
            self.registry_socket,
        )
        self._supervisor.start()

    def _round(self) -> bool:
        # kubelet finds a socket served again by itself (it watches the directory).
        for w in self._watched:
            self._supervisor.keep_serving(w)
        return True

    def stop(self) -> None:
        self._supervisor.stop()
        if self.health is not None:
            self.health.close()
        # Unregistered first: kubelet turns to another instance (a rolling update's), and
        # the calls it already made here get to end.
        self._reg.stop()
        self._dra.stop(grace=self.stop_grace)

    def registration(self) -> tuple[bool, str]:
        """Whether kubelet took the plugin, and a word on it (the /healthz answer)."""
        if self.registered.is_set():
            return True, "registered with kubelet"
        return False, f"not registered with kubelet: {self.last_error or 'waiting for kubelet'}"

    def serving(self) -> dict[str, Any]:
        return {"dra": self._dra.serving(), "registration": self._reg.serving()}
