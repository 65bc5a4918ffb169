"""The fake's object store: objects by resource, one resourceVersion counter for all of
them (as etcd's revision), and the history of changes that watches replay.

Stored objects are never changed in place: every write stores a new dict, together with
its JSON bytes, so reads hand out bytes without copying or re-encoding.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, already_exists, conflict, expired, invalid, not_found
from .resources import ALL_TYPES, ResourceType, check_name


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


ETCD_MAX_REQUEST = 1536 * 1024


def _encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Stored:
    obj: dict[str, Any]  # read-only by convention
    raw: bytes  # the object as JSON, kind and apiVersion first
    item_raw: bytes  # as a list item: built-in lists leave out kind and apiVersion


@dataclass(frozen=True, slots=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    resource: str  # ResourceType.key
    namespace: str
    new: Stored
    old: Stored | None


def _store(rt: ResourceType, obj: dict[str, Any]) -> Stored:
    ordered = {"kind": rt.kind, "apiVersion": rt.api_version}
    ordered.update((k, v) for k, v in obj.items() if k not in ("kind", "apiVersion"))
    raw = _encode(ordered)
    if rt.custom:
        return Stored(ordered, raw, raw)
    prefix = len(_encode({"kind": rt.kind, "apiVersion": rt.api_version})) - 1  # up to the comma
    return Stored(ordered, raw, b"{" + raw[prefix + 1 :])


def _without_rv(obj: dict[str, Any]) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta.pop("managedFields", None)
    return {**obj, "metadata": meta}


class Store:
    """Thread-safe. ``cond`` is notified on every change (and on close)."""

    def __init__(self, *, history: int = 20_000) -> None:
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self._rv = 1000
        self._objects: dict[str, dict[tuple[str, str], Stored]] = {t.key: {} for t in ALL_TYPES}
        self._events: list[Event] = []
        self._history = history
        # Feature gates the API server was started with (absent: enabled).
        self.feature_gates: dict[str, bool] = {}
        self._oldest_rv = self._rv  # watches may start at any rv >= this
        self.closed = False

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    # -- reads ------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Stored:
        with self.lock:
            found = self._objects[rt.key].get((namespace, name))
        if found is None:
            raise not_found(rt.plural, rt.group, name)
        return found

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        match: Callable[[dict[str, Any]], bool] = lambda _o: True,
    ) -> tuple[list[Stored], int]:
        """Objects of one type (one namespace, or all when None) sorted by namespace and
        name, as etcd's key order gives them; and the store's resourceVersion."""
        with self.lock:
            items = [
                s for (ns, _), s in self._objects[rt.key].items() if namespace is None or ns == namespace
            ]
            rv = self._rv
        items = [s for s in items if match(s.obj)]
        items.sort(key=lambda s: (s.obj["metadata"].get("namespace", ""), s.obj["metadata"]["name"]))
        return items, rv

    # -- writes -----------------------------------------------------------------------

    def create(
        self, rt: ResourceType, namespace: str, obj: dict[str, Any], *, keep_uid: bool = False
    ) -> Stored:
        """``keep_uid``: keep a uid the object brings (state set up by tests only)."""
        obj = json.loads(json.dumps(obj))
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        check_name(rt, meta.get("name"))
        if rt.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not (keep_uid and meta.get("uid")):
            meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta.pop("resourceVersion", None)
        meta.pop("deletionTimestamp", None)
        if rt.custom:
            meta["generation"] = 1
        if rt.kind in ("Node", "Pod"):
            obj.setdefault("spec", {})
            obj.setdefault("status", {})
        if rt.normalize:
            rt.normalize(obj)
        if rt.gated:
            rt.gated(obj, self.feature_gates)
        if rt.validate:
            rt.validate(obj, None)
        with self.lock:
            key = (namespace if rt.namespaced else "", meta["name"])
            if key in self._objects[rt.key]:
                raise already_exists(rt.plural, rt.group, meta["name"])
            return self._commit(rt, key, None, obj, "ADDED")

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        change: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        subresource: str = "",
        require_rv: bool = False,
    ) -> Stored:
        """Read-modify-write under the lock. ``change`` gets a private copy of the current
        object and returns the new one; a resourceVersion it leaves set must be the
        current one (409 Conflict otherwise), an empty one means "unconditional"."""
        with self.lock:
            key = (namespace if rt.namespaced else "", name)
            current = self._objects[rt.key].get(key)
            if current is None:
                raise not_found(rt.plural, rt.group, name)
            new = change(json.loads(current.raw))
            if not isinstance(new, dict):
                raise ApiError(400, "the patched or updated object is not a JSON object")
            meta = new.get("metadata")
            if not isinstance(meta, dict):
                meta = new["metadata"] = {}
            old_meta = current.obj["metadata"]
            want_rv = meta.get("resourceVersion") or ""
            if not want_rv and require_rv:
                raise invalid(
                    rt.kind,
                    rt.group,
                    name,
                    [("metadata.resourceVersion", "0x0", "must be specified for an update")],
                )
            if want_rv and want_rv != old_meta["resourceVersion"]:
                raise conflict(rt.plural, rt.group, name)
            # What no write may change, and what each endpoint leaves alone.
            for k in ("name", "namespace", "uid", "creationTimestamp", "generation", "deletionTimestamp"):
                if k in old_meta:
                    meta[k] = old_meta[k]
                else:
                    meta.pop(k, None)
            # Parts kept from the stored object are shared, not copied: stored objects
            # are never changed in place.
            if subresource == "status":
                new["spec"] = current.obj.get("spec")
                for k in (
                    ("labels", "annotations", "finalizers", "ownerReferences") if rt.status_keeps_meta else ()
                ):
                    if k in old_meta:
                        meta[k] = old_meta[k]
                    else:
                        meta.pop(k, None)
            elif "status" in rt.subresources:
                if "status" in current.obj:
                    new["status"] = current.obj["status"]
                else:
                    new.pop("status", None)
            if rt.custom and new.get("spec") != current.obj.get("spec"):
                meta["generation"] = int(old_meta.get("generation", 1)) + 1
            for k in [k for k in new if new[k] is None and k in ("spec", "status")]:
                new.pop(k)
            if rt.normalize:
                rt.normalize(new)
            if rt.gated:
                rt.gated(new, self.feature_gates)
            if rt.validate:
                rt.validate(new, current.obj)
            new["kind"], new["apiVersion"] = rt.kind, rt.api_version
            if _without_rv(new) == _without_rv(current.obj):
                return current  # a no-op write: no new resourceVersion, no watch event
            return self._commit(rt, key, current, new, "MODIFIED")

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> Stored:
        with self.lock:
            key = (namespace if rt.namespaced else "", name)
            current = self._objects[rt.key].get(key)
            if current is None:
                raise not_found(rt.plural, rt.group, name)
            meta = current.obj["metadata"]
            if uid and uid != meta["uid"]:
                raise conflict(
                    rt.plural,
                    rt.group,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta['uid']}",
                )
            if resource_version and resource_version != meta["resourceVersion"]:
                raise conflict(
                    rt.plural,
                    rt.group,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: {resource_version}, ResourceVersion in object meta: {meta['resourceVersion']}",
                )
            del self._objects[rt.key][key]
            self._rv += 1
            gone = json.loads(current.raw)
            gone["metadata"]["resourceVersion"] = str(self._rv)
            stored = _store(rt, gone)
            self._record(Event(self._rv, "DELETED", rt.key, key[0], stored, current))
            return stored

    def _commit(
        self, rt: ResourceType, key: tuple[str, str], old: Stored | None, new: dict[str, Any], kind: str
    ) -> Stored:
        new["metadata"]["resourceVersion"] = str(self._rv + 1)
        stored = _store(rt, new)
        if len(stored.raw) > ETCD_MAX_REQUEST:
            # etcd's request limit (--max-request-bytes, 1.5 MiB by default): the API
            # server passes etcd's refusal on as an internal error.
            raise ApiError(500, "etcdserver: request is too large")
        self._rv += 1
        self._objects[rt.key][key] = stored
        self._record(Event(self._rv, kind, rt.key, key[0], stored, old))
        return stored

    def _record(self, event: Event) -> None:
        self._events.append(event)
        if len(self._events) > 2 * self._history:
            dropped = len(self._events) - self._history
            self._oldest_rv = self._events[dropped - 1].rv
            del self._events[:dropped]
        self.cond.notify_all()

    # -- watches ----------------------------------------------------------------------

    def events_after(self, rv: int, resources: Iterable[str] | None = None) -> tuple[list[Event], int]:
        """Changes with a resourceVersion above ``rv`` (of the given resources), and the
        store's resourceVersion they run up to; 410 Expired when the history no longer
        reaches back that far."""
        with self.lock:
            if rv < self._oldest_rv:
                raise expired(f"too old resource version: {rv} ({self._oldest_rv})")
            i = bisect.bisect_right(self._events, rv, key=lambda e: e.rv)
            events = self._events[i:]
            upto = self._rv
        if resources is not None:
            wanted = set(resources)
            events = [e for e in events if e.resource in wanted]
        return events, upto

    def wait_beyond(self, rv: int, timeout: float) -> bool:
        """Block until the store's resourceVersion passes ``rv`` (True), or the timeout
        passes or the store closes (False)."""
        with self.cond:
            if self._rv > rv:
                return True
            if self.closed:
                return False
            self.cond.wait(timeout)
            return self._rv > rv

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
