"""The error vocabulary: one typed exception per answer, whichever transport got it."""

from __future__ import annotations

import pytest

from nfd.kube import errors
from nfd.kube.heavy import from_exception


@pytest.mark.parametrize(
    ("status", "cls", "stale"),
    [
        (None, errors.Unreachable, False),
        (400, errors.BadRequest, True),
        (401, errors.Unauthorized, True),
        (403, errors.Forbidden, True),
        (404, errors.NotFound, True),
        (409, errors.Conflict, True),
        (410, errors.Gone, True),
        (422, errors.Invalid, True),
        (429, errors.TooManyRequests, False),
        (500, errors.ServerError, False),
        (503, errors.ServerError, False),
        (418, errors.ApiError, True),
    ],
)
def test_typed_errors(status: int | None, cls: type[errors.ApiError], stale: bool) -> None:
    e = errors.make(status, "x", retry_after=2.0)
    assert type(e) is cls and e.view_stale is stale
    assert e.reason == (str(status) if status else "unreachable")


def test_an_answer_gives_the_servers_message_retry_after_and_details() -> None:
    body = b'{"kind":"Status","message":"nope","details":{"causes":[{"field":"spec"}]}}'
    e = errors.from_response(422, body, None, "PATCH /x")
    assert isinstance(e, errors.Invalid) and e.message == "PATCH /x: nope" and e.details["causes"]
    e = errors.from_response(429, b"not json", "3", "GET /x")
    assert isinstance(e, errors.TooManyRequests) and e.retry_after == 3.0 and e.message == "GET /x: not json"


def test_a_watch_error_event_is_typed() -> None:
    e = errors.watch_error({"kind": "Status", "code": 410, "message": "too old resource version"})
    assert isinstance(e, errors.Gone) and "too old" in e.message


def test_from_the_kubernetes_clients_exception() -> None:
    from kubernetes.client.exceptions import ApiException

    raw = ApiException(status=429, reason="Too Many Requests")
    raw.headers = {"Retry-After": "3"}
    raw.body = '{"message": "slow down"}'
    e = from_exception(raw)
    assert isinstance(e, errors.TooManyRequests) and e.retry_after == 3.0 and "slow down" in str(e)
    assert isinstance(from_exception(ConnectionResetError("reset")), errors.Unreachable)
