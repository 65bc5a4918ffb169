"""The pods on this node, from one node-scoped list and watch (``spec.nodeName=<node>``):
never a request per pod.

Two things come from here: which containers the CPU manager pins (Guaranteed QoS class
and a whole-number CPU request, the static policy's rule), and a nudge when a pod on the
node starts or ends so that the updater looks at PodResources at once. Pods are kept as
the few fields needed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from nfd.topology.kubeapi import KubeApi, path

log = logging.getLogger("nfd.topology")


def whole_cpus(value: Any) -> bool:
    """Whether a CPU quantity is a whole number of CPUs (``2``, ``2000m``, ``2.0``; not
    ``1.5`` or ``500m``). Integer arithmetic: no ``decimal`` (a megabyte of RSS) for this."""
    text = str(value).strip()
    scale = 1
    if text.endswith("m"):
        text, scale = text[:-1], 1000
    whole, _, frac = text.partition(".")
    if not whole.isdigit() or (frac and not frac.isdigit()):
        return False
    frac = frac.rstrip("0")
    if scale == 1000:
        return not frac and int(whole) > 0 and int(whole) % 1000 == 0
    return not frac and int(whole) > 0


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


def _running(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


class PodWatch:
    """Keeps ``(namespace, name) -> pinned container names`` for the node's pods, calls
    ``on_change`` when a pod starts running, stops running, or goes away."""

    def __init__(
        self, api: KubeApi, node_name: str, *, on_change: Callable[[], None], timeout: int = 300
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.on_change = on_change
        self.timeout = timeout
        self._pods: dict[tuple[str, str], tuple[frozenset[str], bool]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._wake = threading.Event()  # synced or stopped: wait_synced returns
        self._thread: threading.Thread | None = None

    def is_exclusive(self, namespace: str, pod: str, container: str) -> bool | None:
        with self._lock:
            known = self._pods.get((namespace, pod))
        return None if known is None else container in known[0]

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

    def _url(self, **query: str) -> str:
        return path("api", "v1", "pods", fieldSelector=f"spec.nodeName={self.node_name}", **query)

    def _list(self) -> str:
        body = self.api.request("GET", self._url())
        pods = {}
        for pod in body.get("items") or []:
            meta = pod.get("metadata") or {}
            pods[(meta.get("namespace", ""), meta.get("name", ""))] = (pinned_containers(pod), _running(pod))
        with self._lock:
            changed = pods != self._pods
            self._pods = pods
        self._synced.set()
        self._wake.set()
        if changed:
            self.on_change()
        return str((body.get("metadata") or {}).get("resourceVersion") or "")

    def _apply(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        with self._lock:
            before = self._pods.get(key)
            if kind == "DELETED":
                self._pods.pop(key, None)
                after = None
            else:
                after = self._pods[key] = (pinned_containers(pod), _running(pod))
        if (before is None) != (after is None) or (before and after and before[1] != after[1]):
            self.on_change()

    def _watch(self, rv: str) -> str:
        url = self._url(
            watch="1", resourceVersion=rv, allowWatchBookmarks="true", timeoutSeconds=str(self.timeout)
        )
        for ev in self.api.watch(url, timeout=self.timeout + 30):
            if self._stop.is_set():
                break
            obj = ev.get("object") or {}
            if ev.get("type") == "ERROR":
                raise RuntimeError(obj.get("message") or "watch error")
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
            if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                self._apply(ev["type"], obj)
        return rv

    def _run(self) -> None:
        delay = 1.0
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    rv = self._list()
                rv = self._watch(rv)
                delay = 1.0
            except Exception as e:  # a watch ends for many reasons: list again, watch again
                log.info(
                    "pod watch for node %s interrupted: %s; listing again in %.0fs", self.node_name, e, delay
                )
                rv = ""
                self._stop.wait(delay)
                delay = min(delay * 2, 60.0)
