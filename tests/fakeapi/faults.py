"""Fault injection: make chosen requests fail or slow down, or take the whole server down
for a while, to test how a client copes."""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass, field

from .errors import ApiError

_MESSAGES = {
    409: "Operation cannot be fulfilled: injected conflict",
    422: "the server rejected our request due to an error in our request (injected)",
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected failure",
    503: "the server is currently unable to handle the request (injected)",
}


@dataclass
class FaultRule:
    """Matches requests by HTTP method and/or a regex searched in the path, and/or the
    Kubernetes verb and resource (``nodes``, ``nodes/status``, ``leases.coordination.k8s.io``)."""

    method: str | None = None
    path: re.Pattern[str] | None = None
    verb: str | None = None
    resource: str | None = None
    status: int | None = None  # None: only the delay
    delay: float = 0.0
    retry_after: int | None = None
    message: str | None = None
    remaining: float = 1  # math.inf: every matching request
    hits: int = field(default=0)

    def matches(self, method: str, path: str, verb: str, resource: str, subresource: str = "") -> bool:
        if self.method and self.method.upper() != method:
            return False
        if self.path is not None and not self.path.search(path):
            return False
        if self.verb and self.verb != verb:
            return False
        full = f"{resource}/{subresource}" if subresource else resource
        return not (self.resource and self.resource not in (resource, full))

    def error(self) -> ApiError | None:
        if self.status is None:
            return None
        headers: dict[str, str] = {}
        details = None
        if self.retry_after is not None:
            headers["Retry-After"] = str(self.retry_after)
            details = {"retryAfterSeconds": self.retry_after}
        elif self.status == 429:
            headers["Retry-After"] = "1"
            details = {"retryAfterSeconds": 1}
        return ApiError(
            self.status,
            self.message or _MESSAGES.get(self.status, "injected failure"),
            details=details,
            headers=headers,
        )


@dataclass
class Overload(FaultRule):
    """API Priority and Fairness seen from a client: matching requests beyond ``qps``
    (with ``burst`` of slack) are answered 429 with Retry-After, the rest served."""

    qps: float = 100.0
    burst: float = 100.0
    tokens: float = 0.0
    stamp: float = 0.0
    admitted: int = 0
    rejected: int = 0

    def admit(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            self.admitted += 1
            return True
        self.rejected += 1
        return False


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._overloads: list[Overload] = []
        self._down_until = 0.0
        self._down_mode = "503"

    def fail(
        self,
        status: int,
        *,
        times: int | None = 1,
        method: str | None = None,
        path: str | None = None,
        verb: str | None = None,
        resource: str | None = None,
        retry_after: int | None = None,
        message: str | None = None,
        delay: float = 0.0,
    ) -> FaultRule:
        """The next ``times`` matching requests (all of them when None) get ``status``
        (409, 422, 429, 500, 503, ...) with a Status body. ``retry_after`` adds a
        Retry-After header (429 always has one, 1 s unless given, as API priority and
        fairness sends). Note that urllib3 under the kubernetes client retries GET, PUT
        and DELETE answered 429/503 with Retry-After by itself (not PATCH or POST)."""
        rule = FaultRule(
            method=method,
            path=re.compile(path) if path else None,
            verb=verb,
            resource=resource,
            status=status,
            delay=delay,
            retry_after=retry_after,
            message=message,
            remaining=math.inf if times is None else times,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def delay(
        self,
        seconds: float,
        *,
        times: int | None = None,
        method: str | None = None,
        path: str | None = None,
        verb: str | None = None,
        resource: str | None = None,
    ) -> FaultRule:
        """Matching requests are answered ``seconds`` late (all of them when times is None)."""
        rule = FaultRule(
            method=method,
            path=re.compile(path) if path else None,
            verb=verb,
            resource=resource,
            delay=seconds,
            remaining=math.inf if times is None else times,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def overload(
        self,
        qps: float,
        *,
        burst: int | None = None,
        retry_after: int = 1,
        method: str | None = None,
        verb: str | None = None,
        resource: str | None = None,
    ) -> Overload:
        """From now on, matching requests over ``qps`` per second (``burst`` at once,
        default ``qps``) get 429 Too Many Requests with ``Retry-After: retry_after``,
        as an API server's flow control answers a client that sends too much."""
        b = float(burst if burst is not None else max(1, int(qps)))
        rule = Overload(
            method=method, verb=verb, resource=resource, status=429, retry_after=retry_after,
            remaining=math.inf, qps=qps, burst=b, tokens=b, stamp=time.monotonic(),
        )  # fmt: skip
        with self._lock:
            self._overloads.append(rule)
        return rule

    def down(self, seconds: float | None = None, *, mode: str = "503") -> None:
        """Every request fails until ``up()`` or until ``seconds`` pass. mode "503":
        ServiceUnavailable answers; mode "reset": connections are closed unanswered, as
        when the API server process is gone."""
        if mode not in ("503", "reset"):
            raise ValueError(f"unknown down mode {mode!r}")
        with self._lock:
            self._down_until = math.inf if seconds is None else time.monotonic() + seconds
            self._down_mode = mode

    def up(self) -> None:
        with self._lock:
            self._down_until = 0.0

    def clear(self) -> None:
        """Remove every rule and bring the server up."""
        with self._lock:
            self._rules.clear()
            self._overloads.clear()
            self._down_until = 0.0

    def down_mode(self) -> str | None:
        with self._lock:
            return self._down_mode if time.monotonic() < self._down_until else None

    def take(
        self, method: str, path: str, verb: str, resource: str, subresource: str = ""
    ) -> tuple[float, ApiError | None]:
        """Consume the rules that match this request: the total delay to add, and the
        error to answer with (the first failing rule's), if any."""
        total_delay, error = 0.0, None
        with self._lock:
            now = time.monotonic()
            for o in self._overloads:
                if o.matches(method, path, verb, resource, subresource) and not o.admit(now):
                    return 0.0, o.error()
            for rule in list(self._rules):
                if not rule.matches(method, path, verb, resource, subresource):
                    continue
                if error is not None and rule.status is not None:
                    continue  # one failure per request; later failing rules wait their turn
                rule.hits += 1
                rule.remaining -= 1
                if rule.remaining <= 0:
                    self._rules.remove(rule)
                total_delay += rule.delay
                if error is None:
                    error = rule.error()
        return total_delay, error
