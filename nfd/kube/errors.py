"""The API server's answers as typed exceptions, made in one place whichever transport
sent the request, so that callers catch what they mean (``except Conflict``) instead of
comparing status codes here and there."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nfd.kube.wire import parse_retry_after


class ApiError(Exception):
    """Any failed API call. ``status`` is the HTTP status, or None when the API server
    could not be reached or did not answer in time; ``message`` the server's own words;
    ``retry_after`` its Retry-After in seconds, when it sent one; ``details`` the Status
    object's details (a 422's field causes)."""

    # The view a caller kept of the object may be stale: a retry reads it again first.
    view_stale = True

    def __init__(
        self,
        status: int | None,
        message: str,
        retry_after: float | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {message}" if status else message)
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.details: Mapping[str, Any] = details or {}

    @property
    def reason(self) -> str:
        """A short label for metrics."""
        return str(self.status) if self.status else "unreachable"


class Unreachable(ApiError):
    """No answer: refused, reset, timed out, or the client is stopping."""

    view_stale = False


class BadRequest(ApiError):
    """400: a selector or query the API server could not parse."""


class Unauthorized(ApiError):
    """401."""


class Forbidden(ApiError):
    """403."""


class NotFound(ApiError):
    """404."""


class Conflict(ApiError):
    """409: someone else wrote first (resourceVersion) or the object already exists."""


class Gone(ApiError):
    """410: a watch's or LIST's resourceVersion is too old; list again."""


class Invalid(ApiError):
    """422: the API server refused the content; ``message`` says why."""


class TooManyRequests(ApiError):
    """429: the API server's flow control asks the client to slow down (``retry_after``)."""

    view_stale = False


class ServerError(ApiError):
    """5xx."""

    view_stale = False


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def make(
    status: int | None,
    message: str,
    retry_after: float | None = None,
    details: Mapping[str, Any] | None = None,
) -> ApiError:
    """The typed exception for ``status`` (None or 0: unreachable)."""
    if not status:
        return Unreachable(None, message)
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    return cls(status, message, retry_after, details)


def from_response(status: int, body: bytes | str | None, retry_after: str | None, what: str) -> ApiError:
    """The error for an answer with an error ``status``: the Status object's message
    (else the body's first 200 characters), its Retry-After header, details; ``what``
    names the request (``GET /api/v1/nodes/x``)."""
    message, details = "", None
    if body:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            message = str(doc.get("message") or "")
            details = doc.get("details") if isinstance(doc.get("details"), dict) else None
        else:
            message = text[:200]
    return make(status, f"{what}: {message}" if message else what, parse_retry_after(retry_after), details)


def watch_error(obj: Mapping[str, Any]) -> ApiError:
    """The error a watch stream carries as an ``ERROR`` event (a Status object)."""
    code = obj.get("code")
    return make(
        int(code) if isinstance(code, int) and code else 500,
        str(obj.get("message") or obj.get("reason") or "watch error"),
        details=obj.get("details") if isinstance(obj.get("details"), dict) else None,
    )
