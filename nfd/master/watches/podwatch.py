"""The workers' pods, listed then watched (only the worker service account's, in its
namespace), so that a token bound to a pod is refused as soon as the pod is deleted:
the API server stops accepting such a token then, and the master's cache of reviews
must not outlive it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from nfd.master.core.kube import KubeApi, Resource
from nfd.master.core.watch import ListWatch, Pages

# Deleted pods are remembered this long, for reviews that were under way at the time.
TOMBSTONE_S = 120.0
PAGE = 500


class PodWatch:
    def __init__(
        self, *, api: KubeApi, namespace: str, service_account: str, on_gone: Callable[[str], None]
    ) -> None:
        self.on_gone = on_gone
        self.pods: dict[str, tuple[str, str]] = {}  # name -> (uid, node name)
        self._uids: set[str] = set()  # of the pods above
        self._gone: dict[str, float] = {}  # uid -> when it was seen deleted
        # While the watch is broken a deletion goes unseen: it is not live then, and it
        # lists again (rather than resuming) to be live once more.
        self.watch = ListWatch(
            api=api,
            resource=Resource(
                "pods", namespace=namespace, field_selector=f"spec.serviceAccountName={service_account}"
            ),
            page_size=PAGE,
            on_list=self._listed,
            on_event=self._apply,
            relist_after_break=True,
        )

    # -- what the authenticator asks ------------------------------------------------------
    def live(self) -> bool:
        """Listed, and the watch has not broken since."""
        return self.watch.live

    def vouches(self, uid: str) -> bool:
        return self.watch.live and uid in self._uids

    def deleted(self, uid: str) -> bool:
        return uid in self._gone

    def node_of(self, name: str, uid: str) -> str | None:
        known = self.pods.get(name)
        return known[1] or None if known is not None and known[0] == uid else None

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        await self.watch.start()

    def stop(self) -> None:
        self.watch.stop()

    async def _listed(self, pages: Pages) -> None:
        pods: dict[str, tuple[str, str]] = {}
        async for page in pages:
            for p in page:
                name, entry = _entry(p)
                if name:
                    pods[name] = entry
        before, self.pods = self.pods, pods
        self._uids = {uid for uid, _node in pods.values()}
        for name, (uid, _node) in before.items():
            if pods.get(name, ("",))[0] != uid:  # deleted while the watch was away
                self._forget(uid)

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


def _entry(pod: dict[str, Any]) -> tuple[str, tuple[str, str]]:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return str(meta.get("name") or ""), (str(meta.get("uid") or ""), str(spec.get("nodeName") or ""))
