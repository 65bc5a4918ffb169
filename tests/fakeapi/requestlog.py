"""What the fake was asked: one record per request, and counters per verb and resource,
so tests can assert things like "no writes in a steady-state round" or "no LIST"."""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True, slots=True)
class RequestRecord:
    seq: int
    method: str
    path: str
    query: str
    verb: str  # get, list, watch, create, update, patch, delete, deletecollection, "" (non-resource)
    resource: str  # nodes, leases.coordination.k8s.io, ...; "" for non-resource paths
    subresource: str
    namespace: str
    name: str
    status: int  # 0: the connection was dropped unanswered
    content_type: str
    duration: float
    user: str = ""  # whom the bearer token stands for; "" without a known token

    @property
    def resource_path(self) -> str:
        """``nodes`` or ``nodes/status``."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


class RequestLog:
    def __init__(self, keep: int = 500_000) -> None:
        self._lock = threading.Lock()
        self._records: deque[RequestRecord] = deque(maxlen=keep)
        self._seq = 0

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def add(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    def mark(self) -> int:
        """A point in the log; pass it as ``since`` to look only at later requests."""
        with self._lock:
            return self._seq

    def records(
        self,
        *,
        since: int = 0,
        verb: str | None = None,
        resource: str | None = None,
        method: str | None = None,
        status: int | None = None,
    ) -> list[RequestRecord]:
        """Matching records. ``resource`` may name a subresource (``nodes/status``);
        plain ``nodes`` matches the subresource too."""
        with self._lock:
            recs = [r for r in self._records if r.seq > since]
        out = []
        for r in recs:
            if verb and r.verb != verb:
                continue
            if method and r.method != method.upper():
                continue
            if status is not None and r.status != status:
                continue
            if resource and resource not in (r.resource, r.resource_path):
                continue
            out.append(r)
        return out

    def count(self, **filters: object) -> int:
        return len(self.records(**filters))  # type: ignore[arg-type]

    def writes(self, *, since: int = 0, resource: str | None = None) -> list[RequestRecord]:
        return [r for r in self.records(since=since, resource=resource) if r.verb in WRITE_VERBS]

    def counts(self, *, since: int = 0) -> Counter[tuple[str, str]]:
        """(verb, resource[/subresource]) -> number of requests."""
        return Counter((r.verb, r.resource_path) for r in self.records(since=since))

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
