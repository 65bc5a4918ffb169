"""pytest fixtures for the fake API server (made available to every test by
tests/conftest.py).

- ``fake_api``: a started FakeApiServer, fresh per test.
- ``fake_api_client``: a real ``kubernetes.client.ApiClient`` for it.
- ``core_v1``: ``kubernetes.client.CoreV1Api`` on that client.
- ``fake_transport``: ``nfd.kube``'s light transport for it (the per-node agents').
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .fake import FakeApiServer


@pytest.fixture
def fake_api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as api:
        yield api


@pytest.fixture
def fake_api_client(fake_api: FakeApiServer) -> Iterator[Any]:
    client = fake_api.api_client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def core_v1(fake_api_client: Any) -> Any:
    from kubernetes import client

    return client.CoreV1Api(fake_api_client)


@pytest.fixture
def fake_transport(fake_api: FakeApiServer) -> Iterator[Any]:
    t = fake_api.transport()
    try:
        yield t
    finally:
        t.close()
