"""The workers' pods, listed then watched (only the worker service account's, in its
namespace), so that a token bound to a pod is refused as soon as the pod is deleted:
the API server stops accepting such a token then, and the master's cache of reviews
must not outlive it."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from nfd.master.kube import KubeApi, KubeError

log = logging.getLogger(__name__)

# Deleted pods are remembered this long, for reviews that were under way at the time.
TOMBSTONE_S = 120.0
PAGE = 500


class PodWatch:
    def __init__(
        self, *, api: KubeApi, namespace: str, service_account: str, on_gone: Callable[[str], None]
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.selector = f"spec.serviceAccountName={service_account}"
        self.on_gone = on_gone
        self.pods: dict[str, tuple[str, str]] = {}  # name -> (uid, node name)
        self._uids: set[str] = set()  # of the pods above
        self._gone: dict[str, float] = {}  # uid -> when it was seen deleted
        self.synced = False
        self._up = False  # listed, and the watch has not broken since
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._resource_version = ""

    # -- what the authenticator asks ------------------------------------------------------
    def live(self) -> bool:
        """Listed, and the watch has not broken since."""
        return self._up

    def vouches(self, uid: str) -> bool:
        return self._up and uid in self._uids

    def deleted(self, uid: str) -> bool:
        return uid in self._gone

    def node_of(self, name: str, uid: str) -> str | None:
        known = self.pods.get(name)
        return known[1] or None if known is not None and known[0] == uid else None

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            await self._relist()
        except KubeError as e:
            log.warning("cannot list the workers' pods yet (%s); tokens are re-checked every few seconds", e)
        self._thread = threading.Thread(target=self._watch_forever, name="pod-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._up = False

    async def _relist(self) -> None:
        pods: dict[str, tuple[str, str]] = {}
        cont: str | None = None
        while True:
            page = await self.api.list_pods(self.namespace, self.selector, limit=PAGE, cont=cont)
            for p in page.get("items") or []:
                name, entry = _entry(p)
                if name:
                    pods[name] = entry
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or None
            if not cont:
                break
        self._resource_version = str(meta.get("resourceVersion") or "")
        before, self.pods = self.pods, pods
        self._uids = {uid for uid, _node in pods.values()}
        for name, (uid, _node) in before.items():
            if pods.get(name, ("",))[0] != uid:  # deleted while the watch was away
                self._forget(uid)
        self.synced = self._up = True

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        name, entry = _entry(obj)
        if not name:
            return
        if kind == "DELETED":
            if self.pods.get(name, ("",))[0] == entry[0]:
                del self.pods[name]
            self._forget(entry[0])
        elif kind in ("ADDED", "MODIFIED"):
            old = self.pods.get(name)
            if old is not None and old[0] != entry[0]:
                self._forget(old[0])  # replaced under the same name
            self.pods[name] = entry
            self._uids.add(entry[0])

    def _forget(self, uid: str) -> None:
        self._uids.discard(uid)
        now = time.monotonic()
        self._gone[uid] = now
        if len(self._gone) > 1000:
            self._gone = {u: t for u, t in self._gone.items() if now - t < TOMBSTONE_S}
        self.on_gone(uid)

    def _watch_forever(self) -> None:
        """Blocking watch in its own thread; events are applied on the event loop. On an
        error: not live until listed again (with backoff), then watch again."""
        from kubernetes import watch

        assert self._loop is not None
        delay = 0.5
        while not self._stop.is_set():
            w = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                if not self.synced:
                    raise KubeError(None, "not listed yet")
                for ev in w.stream(  # type: ignore[no-untyped-call]
                    self.api.core.list_namespaced_pod,
                    self.namespace,
                    field_selector=self.selector,
                    resource_version=self._resource_version or None,
                    timeout_seconds=300,
                    allow_watch_bookmarks=True,
                    deserialize=False,
                    # a stream gone silent (a dead connection) ends rather than hang
                    _request_timeout=(10, 330),
                ):
                    if self._stop.is_set():
                        w.stop()  # type: ignore[no-untyped-call]
                        return
                    obj = ev.get("object") or {}
                    kind = str(ev.get("type"))
                    if kind == "ERROR":
                        raise KubeError(obj.get("code"), str(obj.get("message") or "watch error"))
                    rv = (obj.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self._resource_version = str(rv)
                    self._loop.call_soon_threadsafe(self._apply, kind, obj)
                    delay = 0.5
            except Exception as e:  # the watch breaks for many reasons; always recover
                self._up = False
                log.info("pod watch interrupted: %s", e)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, 30.0)
                fut = asyncio.run_coroutine_threadsafe(self._relist(), self._loop)
                try:
                    fut.result(timeout=60)
                except Exception as e2:
                    log.info("pod relist failed: %s", e2)


def _entry(pod: dict[str, Any]) -> tuple[str, tuple[str, str]]:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return str(meta.get("name") or ""), (str(meta.get("uid") or ""), str(spec.get("nodeName") or ""))
