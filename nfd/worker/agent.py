"""The long-running worker: a pass scheduler plus what triggers it early, and the
status server. ``nfd worker`` builds one from its flags; tests build one directly."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from nfd.worker.debounce import Debouncer
from nfd.worker.hotplug import HotplugMonitor, MonitorUnavailable
from nfd.worker.loop import Worker
from nfd.worker.metrics import StatusServer, WorkerMetrics
from nfd.worker.schedule import PassScheduler
from nfd.worker.watch import DirWatcher

log = logging.getLogger(__name__)

HOTPLUG_DEBOUNCE = 0.3
# A ConfigMap update or an editor's save is several renames and writes in a row.
FILES_DEBOUNCE = 0.1
# A pass stuck this long makes /healthz fail, so the kubelet restarts the pod.
STUCK_PASS = 300.0


class Agent:
    def __init__(
        self,
        worker: Worker,
        *,
        interval: float,
        features_dir: str | os.PathLike[str] | None = None,
        monitor: HotplugMonitor | None = None,
        metrics: WorkerMetrics | None = None,
        status_host: str = "0.0.0.0",
        status_port: int | None = None,  # None: no status server; 0: any free port
        use_inotify: bool = True,
        hotplug_debounce: float = HOTPLUG_DEBOUNCE,
    ) -> None:
        self.worker = worker
        self.scheduler = PassScheduler(worker, interval)
        self._debouncer = Debouncer(hotplug_debounce, self.scheduler.trigger)
        self._files_debouncer = Debouncer(FILES_DEBOUNCE, self.scheduler.trigger)
        self._monitor = monitor
        self.hotplug_live = False
        self.watcher = (
            DirWatcher(Path(features_dir), self._files_debouncer.event, use_inotify=use_inotify)
            if features_dir is not None
            else None
        )
        self.status: StatusServer | None = None
        if metrics is not None and status_port is not None:
            self.status = StatusServer(metrics, self.health, host=status_host, port=status_port)

    def start(self) -> None:
        if self.status is not None:
            self.status.start()
        if self.watcher is not None:
            self.watcher.start()
        if self._monitor is not None:
            try:
                self._monitor.start(self._debouncer.event)
                self.hotplug_live = True
            except MonitorUnavailable as e:
                # Said once: from here on hot-plugged devices show at the next interval.
                log.warning(
                    "PCI/USB hot-plug events are not available (%s); new devices are found at "
                    "the next interval (%gs)",
                    e,
                    self.scheduler.interval,
                )
        self.scheduler.start()

    def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.stop()
        self._debouncer.close()
        self._files_debouncer.close()
        if self.watcher is not None:
            self.watcher.stop()
        self.scheduler.stop()
        if self.status is not None:
            self.status.stop()
        self.worker.client.close()

    def run_until(self, stop: threading.Event) -> None:
        self.start()
        try:
            stop.wait()
        finally:
            self.stop()

    def health(self) -> tuple[bool, str]:
        if not self.scheduler.running:
            return False, "scheduler not running"
        started = self.worker.pass_started
        if started is not None and time.monotonic() - started > STUCK_PASS:
            return False, f"a pass has been running for {time.monotonic() - started:.0f}s"
        return True, "ok"
