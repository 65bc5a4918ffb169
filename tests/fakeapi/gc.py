"""The fake's garbage collector: what kube-controller-manager's does with ownerReferences.

- An object whose owner references all name owners that do not exist (by kind and name,
  with the same uid) is deleted as soon as it is written. A namespaced owner is looked up
  in the dependent's namespace, a cluster-scoped one (a Node) cluster-wide.
- When some owners exist and others do not, only the dangling references are removed.
- An owner's deletion deletes its dependents (background propagation), and so on down.
- An owner of a kind the cluster cannot resolve (no such API) keeps the object as it is,
  whatever its other owners, as the real collector gives up on it; so does a namespaced
  owner of a cluster-scoped object. Built-in kinds the fake does not serve (DaemonSet,
  Deployment, ...) can have no objects here, so owners of those kinds never exist.

It runs on a thread of its own, as the controller does, fed by the store's change
history; its writes are store changes (resourceVersions, watch events) but not requests,
so they are not in the request log.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .resources import ALL_TYPES, ResourceType
from .store import Event, Store

log = logging.getLogger(__name__)

# Built-in kinds of a real cluster that the fake does not serve: (apiVersion, kind) ->
# namespaced. References to them resolve, and name nothing.
UNSERVED_BUILTIN_KINDS = {
    ("v1", "Namespace"): False,
    ("v1", "Service"): True,
    ("v1", "ServiceAccount"): True,
    ("v1", "ReplicationController"): True,
    ("apps/v1", "DaemonSet"): True,
    ("apps/v1", "Deployment"): True,
    ("apps/v1", "ReplicaSet"): True,
    ("apps/v1", "StatefulSet"): True,
    ("batch/v1", "Job"): True,
    ("batch/v1", "CronJob"): True,
}
_SERVED = {(t.api_version, t.kind): t for t in ALL_TYPES}
_BY_KEY = {t.key: t for t in ALL_TYPES}


@dataclass(frozen=True, slots=True)
class _Ref:
    resource: str  # ResourceType.key of the dependent
    namespace: str
    name: str
    uid: str


def _owner_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [r for r in refs if isinstance(r, dict)]


def _ref_of(resource: str, obj: dict[str, Any]) -> _Ref:
    meta = obj["metadata"]
    return _Ref(resource, meta.get("namespace", ""), meta["name"], meta["uid"])


class GarbageCollector:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._seen = 0  # every change up to this resourceVersion has been looked at
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="fake-apiserver-gc", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._store.cond:
            self._store.cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set() and not self._store.closed:
            try:
                self.collect()
            except Exception:  # a bug of the fake's: say so, and keep collecting
                log.exception("fake garbage collector")
            self._store.wait_beyond(self._seen, 0.5)

    def collect(self) -> None:
        """Act on every change since the last call; on the whole store the first time,
        and when the change history no longer reaches back that far."""
        events: list[Event] | None = None
        if self._seen:
            try:
                events, upto = self._store.events_after(self._seen)
            except ApiError:  # 410 Expired
                events = None
        if events is None:
            upto = self._store.resource_version
            self._seen = upto
            self._check(self._all_dependents(lambda _r: True))
            return
        self._seen = upto
        gone = {e.new.obj["metadata"]["uid"] for e in events if e.type == "DELETED"}
        written = [
            _ref_of(e.resource, e.new.obj)
            for e in events
            if e.type != "DELETED"
            and _owner_refs(e.new.obj)
            and (e.old is None or _owner_refs(e.old.obj) != _owner_refs(e.new.obj))
        ]
        if gone:
            written += self._all_dependents(lambda r: r.get("uid") in gone)
        self._check(written)

    def _all_dependents(self, owned_by: Callable[[dict[str, Any]], bool]) -> list[_Ref]:
        found = []
        for rt in ALL_TYPES:
            items, _ = self._store.list(rt, None, lambda o: any(owned_by(r) for r in _owner_refs(o)))
            found += [_ref_of(rt.key, s.obj) for s in items]
        return found

    def _check(self, refs: Iterable[_Ref]) -> None:
        for ref in dict.fromkeys(refs):  # once each, in order
            rt = _BY_KEY[ref.resource]
            try:
                current = self._store.get(rt, ref.namespace, ref.name).obj
            except ApiError:
                continue  # deleted meanwhile
            if current["metadata"]["uid"] != ref.uid:
                continue  # replaced meanwhile: its own write event brings it here
            verdicts = [self._owner_exists(rt, ref.namespace, r) for r in _owner_refs(current)]
            if not verdicts or None in verdicts:
                continue
            dangling = {i for i, there in enumerate(verdicts) if not there}
            if not dangling:
                continue
            try:
                if len(dangling) == len(verdicts):
                    self._store.delete(rt, ref.namespace, ref.name, uid=ref.uid)
                else:
                    self._store.update(rt, ref.namespace, ref.name, _drop_refs(ref.uid, current, dangling))
            except ApiError:
                pass  # changed meanwhile: its next write event brings it here again

    def _owner_exists(self, dependent: ResourceType, namespace: str, ref: dict[str, Any]) -> bool | None:
        """Whether the owner ``ref`` names exists with that uid; None when the reference
        cannot be resolved (unknown kind, or a namespaced owner of a cluster-scoped object)."""
        key = (str(ref.get("apiVersion")), str(ref.get("kind")))
        rt = _SERVED.get(key)
        namespaced = rt.namespaced if rt else UNSERVED_BUILTIN_KINDS.get(key)
        if namespaced is None or (namespaced and not dependent.namespaced):
            return None
        if rt is None:
            return False
        try:
            owner = self._store.get(rt, namespace if rt.namespaced else "", str(ref.get("name") or "")).obj
        except ApiError:
            return False
        return bool(owner["metadata"]["uid"] == ref.get("uid"))


def _drop_refs(uid: str, seen: dict[str, Any], dangling: set[int]) -> Any:
    """The change that removes the dangling references, provided the object is still the
    one looked at (else a conflict: it is looked at again after its next write)."""
    want = json.dumps(_owner_refs(seen))

    def change(obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        if meta["uid"] != uid or json.dumps(_owner_refs(obj)) != want:
            raise ApiError(409, "owner references changed meanwhile")
        meta["ownerReferences"] = [r for i, r in enumerate(_owner_refs(obj)) if i not in dangling]
        return obj

    return change


__all__ = ["UNSERVED_BUILTIN_KINDS", "GarbageCollector"]
