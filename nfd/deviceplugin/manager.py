"""Runs every resource's plugin: serve, register, keep registered across kubelet restarts.

The supervisor (:class:`nfd.unixgrpc.SocketSupervisor`, the DRA plugin's too) looks at
the plugin directory every ``watch_interval`` seconds (two stat calls per resource):

- our socket gone or replaced (a restarting kubelet deletes every socket) -> serve again;
- ``kubelet.sock`` is a new file (kubelet restarted) -> register again at once. A file is
  known by inode *and* change time: a filesystem may hand a deleted socket's inode number
  straight to the new one;
- ``kubelet.sock`` missing -> wait; Register failing with UNAVAILABLE -> retry with
  exponential backoff (reset when kubelet.sock changes);
- Register answered with an error -> that resource stops, with a log line; others go on.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nfd.backoff import Backoff
from nfd.deviceplugin.server import KUBELET_SOCKET, Outcome, ResourcePlugin, socket_name
from nfd.devices import cdi
from nfd.devices.health import HealthMonitor
from nfd.devices.inventory import ResourceState, close_states
from nfd.unixgrpc import MAX_SOCKET_PATH, FileId, SocketSupervisor, Watched, file_id

if TYPE_CHECKING:
    from nfd.deviceplugin.metrics import DevicePluginMetrics

log = logging.getLogger("nfd.deviceplugin")


def _backoff() -> Backoff:
    # One plugin retrying its own kubelet, not a fleet at a server: exact steps.
    return Backoff(initial=0.1, cap=5.0, jitter=0)


@dataclass
class _Track:
    plugin: ResourcePlugin
    registered_ino: FileId | None = None  # the kubelet.sock we registered with
    tried_ino: FileId | None = None
    register_backoff: Backoff = field(default_factory=_backoff)
    rejected: str | None = None
    registrations: int = 0
    serve_backoff: Backoff = field(default_factory=_backoff)
    watched: Watched = field(init=False)

    def __post_init__(self) -> None:
        self.watched = Watched(self.plugin, self.plugin.name, self.serve_backoff, on_gone=self._forget)

    def _forget(self) -> None:
        self.registered_ino = None  # a new socket registers again


def socket_path_error(plugin_dir: str, resources: Sequence[str]) -> str | None:
    for r in resources:
        path = os.path.join(plugin_dir, socket_name(r))
        if len(path.encode()) > MAX_SOCKET_PATH:
            return f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes; use a shorter --plugin-dir"
    return None


class Manager:
    def __init__(
        self,
        states: Sequence[ResourceState],
        *,
        plugin_dir: str,
        cdi_dir: str | None = None,
        poll_interval: float = 0.2,
        watch_interval: float = 0.1,
        use_udev: bool = True,
        metrics: DevicePluginMetrics | None = None,
    ) -> None:
        self.plugin_dir = plugin_dir
        self.cdi_dir = cdi_dir
        self.watch_interval = watch_interval
        # Resources without devices are not served: a config shared by different nodes
        # names hardware that some nodes lack.
        self.states = [s for s in states if s.slots]
        self.health = HealthMonitor(self.states, interval=poll_interval, use_udev=use_udev)
        self._tracks = [_Track(ResourcePlugin(s, plugin_dir, metrics=metrics)) for s in self.states]
        self._lock = threading.Lock()
        self._supervisor = SocketSupervisor(
            self._round, interval=watch_interval, name="nfd-dp-supervisor", log=log
        )
        self._done = threading.Event()
        self._stopped = False

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        for s in self.states:
            if s.res.cdi_kind and self.cdi_dir:
                self._write_cdi(s)
                s.on_edits_changed = self._write_cdi
        self.health.start()
        for t in self._tracks:
            t.plugin.serve()
            log.info(
                "%s: serving %d device(s) on %s", t.plugin.name, len(t.plugin.state.slots), t.plugin.socket
            )
        if not self._tracks:
            log.warning("no resource has devices on this node; nothing to serve")
        self._supervisor.start()

    def stop(self) -> None:
        """Stop serving and remove our sockets (CDI specs stay). Safe to call twice."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._supervisor.stop()
        self.health.stop()
        for t in self._tracks:
            t.plugin.stop()
        close_states(self.states)
        self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until stopped, or until every resource was rejected; True if done."""
        return self._done.wait(timeout)

    # -- views -----------------------------------------------------------------------
    def served_resources(self) -> list[str]:
        """The resources this process serves now (rejected ones drop out)."""
        with self._lock:
            return sorted(t.plugin.name for t in self._tracks if t.rejected is None)

    def registrations(self, resource: str) -> int:
        """How many times ``resource`` registered with kubelet (tests, benchmarks)."""
        with self._lock:
            return next((t.registrations for t in self._tracks if t.plugin.name == resource), 0)

    def rejected(self) -> dict[str, str]:
        with self._lock:
            return {t.plugin.name: t.rejected for t in self._tracks if t.rejected is not None}

    # -- internals -------------------------------------------------------------------
    def _write_cdi(self, s: ResourceState) -> None:
        assert self.cdi_dir is not None and s.res.cdi_kind is not None
        try:
            path = cdi.write_spec(self.cdi_dir, s.res.cdi_kind, s.devices(), s.res.cdi_version)
            log.info("%s: wrote CDI spec %s", s.name, path)
        except OSError as e:
            log.error("%s: cannot write CDI spec in %s: %s", s.name, self.cdi_dir, e.strerror or e)

    def _kubelet_ino(self) -> FileId | None:
        try:
            return file_id(os.stat(os.path.join(self.plugin_dir, KUBELET_SOCKET)))
        except OSError:
            return None

    def _round(self) -> bool:
        self._tick()
        active = [t for t in self._tracks if t.rejected is None]
        if self._tracks and not active:
            log.error("every resource was rejected by kubelet; stopping")
            self._done.set()
            return False
        return True

    def _tick(self) -> None:
        kubelet_ino = self._kubelet_ino()
        for t in self._tracks:
            if t.rejected is not None or self._supervisor.stopping:
                continue
            if not self._supervisor.keep_serving(t.watched):
                continue
            p = t.plugin
            if kubelet_ino is None or t.registered_ino == kubelet_ino:
                continue
            if kubelet_ino != t.tried_ino:  # a new kubelet: try now, fresh backoff
                t.tried_ino = kubelet_ino
                t.register_backoff.reset()
            if not t.register_backoff.due():
                continue
            outcome, detail = p.register()
            with self._lock:
                if outcome is Outcome.REGISTERED:
                    t.registered_ino = kubelet_ino
                    t.registrations += 1
                    log.info("%s: registered with kubelet", p.name)
                elif outcome is Outcome.RETRY:
                    delay = t.register_backoff.fail()
                    log.info("%s: kubelet not answering (%s); retry in %.1f s", p.name, detail, delay)
                else:
                    t.rejected = detail
                    log.error(
                        "%s: kubelet rejected the registration (%s); stopping this resource", p.name, detail
                    )
            if outcome is Outcome.REJECTED:
                p.stop()
