"""The API server's answers as typed exceptions, made in one place (``from_exception``)
so that callers catch what they mean (``except Conflict``) instead of comparing status
codes here and there."""

from __future__ import annotations

import json


class KubeError(Exception):
    """Any failed API call. ``status`` is the HTTP status, or None when the API server
    could not be reached or did not answer in time; ``retry_after`` is its Retry-After
    in seconds, when it sent one."""

    def __init__(self, status: int | None, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    # The view the master kept of the object may be right: a retry needs no fresh read.
    view_stale = True

    @property
    def reason(self) -> str:
        """A short label for metrics."""
        return str(self.status) if self.status else "unreachable"


class Unreachable(KubeError):
    """No answer: refused, reset, timed out."""

    view_stale = False


class Unauthorized(KubeError):
    """401."""


class Forbidden(KubeError):
    """403."""


class NotFound(KubeError):
    """404."""


class Conflict(KubeError):
    """409: someone else wrote first (resourceVersion) or the object already exists."""


class Invalid(KubeError):
    """422: the API server refused the content."""


class TooManyRequests(KubeError):
    """429: the API server's flow control asks the client to slow down."""

    view_stale = False


class ServerError(KubeError):
    """5xx."""

    view_stale = False


_BY_STATUS: dict[int, type[KubeError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: Invalid,
    429: TooManyRequests,
}


def make(status: int | None, message: str, retry_after: float | None = None) -> KubeError:
    """The typed exception for ``status``."""
    if not status:
        return Unreachable(None, message)
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else KubeError)
    return cls(status, message, retry_after)


def from_exception(e: BaseException) -> KubeError:
    """What the kubernetes client (or its transport) raised, as a KubeError."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(e, KubeError):
        return e
    if not isinstance(e, ApiException):
        return Unreachable(None, f"{type(e).__name__}: {e}")
    headers = e.headers or {}
    ra = headers.get("Retry-After") if hasattr(headers, "get") else None
    retry_after = None
    if ra:
        try:
            retry_after = max(0.0, float(ra))
        except ValueError:
            retry_after = None
    msg = e.reason or ""
    if e.body:
        try:
            msg = json.loads(e.body).get("message") or msg
        except (ValueError, AttributeError):
            msg = str(e.body)[:200]
    status = int(e.status or 0) or None
    return make(status, f"{e.status} {msg}".strip(), retry_after)
