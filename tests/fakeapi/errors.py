"""Kubernetes ``Status`` error bodies, shaped as the real API server writes them.

Every failure the fake returns is one of these, so a client sees the same ``code``,
``reason``, ``message`` and ``details`` it would get from a cluster.
"""

from __future__ import annotations

from typing import Any

# HTTP code -> the reason the API server puts in a Status it makes for that code.
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """A request the fake refuses; ``status`` is the Status object it sends back."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.message = message
        self.details = details
        self.headers = headers or {}

    @property
    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if group:
        d["group"] = group
    d["kind"] = kind
    return d


def qualified(plural: str, group: str) -> str:
    """``nodes`` or ``leases.coordination.k8s.io``: how messages name a resource."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, f'{qualified(plural, group)} "{name}" not found', details=_details(name, group, plural)
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        reason="Conflict",
        details=_details(name, group, plural),
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """``causes``: (field, bad value, why). Message and causes as field validation writes them."""
    parts = [f'{field}: Invalid value: "{value}": {why}' for field, value, why in causes]
    msg = f'{kind} "{name}" is invalid: ' + (parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]")
    details = _details(name, group, kind)
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": f'Invalid value: "{value}": {why}', "field": field}
        for field, value, why in causes
    ]
    return ApiError(422, msg, details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def unprocessable(message: str) -> ApiError:
    """What the API server answers when a JSON Patch does not apply (a failed ``test`` too)."""
    return ApiError(422, message)


def method_not_allowed() -> ApiError:
    return ApiError(405, "the server does not allow this method on the requested resource")


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )


def expired(message: str) -> ApiError:
    return ApiError(410, message)
