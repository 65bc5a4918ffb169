"""The pods on this node, from one node-scoped list and watch (``spec.nodeName=<node>``):
never a request per pod.

Three things come from here: which containers the CPU manager pins (Guaranteed QoS class
and a whole-number CPU request, the static policy's rule), what the running pods request
(for the resources kubelet hands out from a node-wide pool rather than per NUMA zone),
and a nudge when a pod on the node starts or ends so that the updater looks at
PodResources at once. Pods are kept as the few fields needed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nfd.backoff import Backoff
from nfd.kube.listwatch import WatchLoop, pages, watch_path
from nfd.kube.transport import Transport, path
from nfd.policy import scaled_quantity

log = logging.getLogger("nfd.topology")


def whole_cpus(value: Any) -> bool:
    """Whether a CPU quantity is a whole number of CPUs (``2``, ``2000m``, ``2.0``; not
    ``1.5`` or ``500m``)."""
    try:
        milli = scaled_quantity(str(value).strip(), 1000)
    except ValueError:
        return False
    return milli > 0 and milli % 1000 == 0


def _requests(container: dict[str, Any]) -> dict[str, int]:
    """CPU in milli-CPUs, memory and huge pages in bytes; a limit alone is the request, as
    the API server defaults it."""
    res = container.get("resources") or {}
    asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    out = {}
    for name, value in asked.items():
        if name in ("cpu", "memory") or name.startswith("hugepages-"):
            try:
                out[name] = scaled_quantity(str(value), 1000 if name == "cpu" else 1)
            except ValueError:  # the API server validated it; a value we cannot read counts as 0
                continue
    return out


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in a.keys() | b.keys()}


def _peak(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: max(a.get(k, 0), b.get(k, 0)) for k in a.keys() | b.keys()}


def pod_requests(pod: dict[str, Any]) -> dict[str, int]:
    """The pod's effective request as the scheduler and kubelet's admission count it: the
    app containers and sidecars together, or the largest init container (with the sidecars
    started before it) if that is more, plus the pod overhead."""
    spec = pod.get("spec") or {}
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, _requests(c))
            init_peak = _peak(init_peak, sidecars)
        else:
            init_peak = _peak(init_peak, _add(sidecars, _requests(c)))
    apps: dict[str, int] = sidecars
    for c in spec.get("containers") or []:
        apps = _add(apps, _requests(c))
    overhead = _requests({"resources": {"requests": spec.get("overhead") or {}}})
    return _add(_peak(apps, init_peak), overhead)


def pinned_containers(pod: dict[str, Any]) -> frozenset[str]:
    """Names of the containers whose CPUs the static CPU manager assigns exclusively."""
    if (pod.get("status") or {}).get("qosClass") != "Guaranteed":
        return frozenset()
    spec = pod.get("spec") or {}
    out = set()
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        res = c.get("resources") or {}
        cpu = (res.get("requests") or {}).get("cpu", (res.get("limits") or {}).get("cpu"))
        if cpu is not None and whole_cpus(cpu):
            out.add(c.get("name", ""))
    return frozenset(out)


@dataclass(frozen=True)
class _Pod:
    pinned: frozenset[str]
    running: bool
    requests: dict[str, int] = field(default_factory=dict)

    def counted(self) -> dict[str, int] | None:
        """What the pod holds on the node: its requests while it runs (a pod resized in
        place changes them), nothing otherwise."""
        return self.requests if self.running else None


def _pod(pod: dict[str, Any]) -> _Pod:
    return _Pod(
        pinned_containers(pod), (pod.get("status") or {}).get("phase") == "Running", pod_requests(pod)
    )


class PodWatch:
    """Keeps the node's pods (which containers are pinned, whether the pod runs, what it
    requests), calls ``on_change`` when a pod starts running, stops running, goes away, or
    changes its requests while running."""

    def __init__(
        self, api: Transport, node_name: str, *, on_change: Callable[[], None], timeout: int = 300
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.on_change = on_change
        self.timeout = timeout
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._wake = threading.Event()  # synced or stopped: wait_synced returns
        self._thread: threading.Thread | None = None

    def is_exclusive(self, namespace: str, pod: str, container: str) -> bool | None:
        with self._lock:
            known = self._pods.get((namespace, pod))
        return None if known is None else container in known.pinned

    def requested(self) -> dict[str, int]:
        """What the running pods request together (CPU in milli-CPUs, memory and huge pages
        in bytes)."""
        with self._lock:
            running = [p.requests for p in self._pods.values() if p.running]
        total: dict[str, int] = {}
        for r in running:
            total = _add(total, r)
        return total

    def wait_synced(self, timeout: float) -> bool:
        """Whether the pods were listed within ``timeout`` seconds; False as soon as the
        watch is stopped."""
        self._wake.wait(timeout)
        return self._synced.is_set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _path(self) -> str:
        return path("api", "v1", "pods", fieldSelector=f"spec.nodeName={self.node_name}")

    def _list(self) -> str:
        pods = {}
        rv = ""
        for page in pages(self.api, self._path(), limit=500):
            rv = rv or str((page.get("metadata") or {}).get("resourceVersion") or "")
            for pod in page.get("items") or []:
                meta = pod.get("metadata") or {}
                pods[(meta.get("namespace", ""), meta.get("name", ""))] = _pod(pod)
        with self._lock:
            changed = pods != self._pods
            self._pods = pods
        self._synced.set()
        self._wake.set()
        if changed:
            self.on_change()
        return rv

    def _apply(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        with self._lock:
            before = self._pods.get(key)
            if kind == "DELETED":
                self._pods.pop(key, None)
                after = None
            else:
                after = self._pods[key] = _pod(pod)
        if (before is None) != (after is None) or (before and after and before.counted() != after.counted()):
            self.on_change()

    def _run(self) -> None:
        # A pod that came or went while the watch was broken would be missed by a
        # resumed watch only if its events expired meanwhile; a node's pods are a
        # small LIST, so a break lists again.
        WatchLoop(
            name=f"pod watch for node {self.node_name}",
            relist=self._list,
            open_watch=lambda rv: self.api.watch(
                watch_path(self._path(), rv, self.timeout), timeout=self.timeout + 30
            ),
            on_event=self._apply,
            backoff=Backoff(initial=1.0, cap=60.0, jitter=0),
            stop=self._stop,
            relist_after_break=True,
        ).run()
