"""A master wired to the fake API server, for the publishing tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from nfd.kube.config import Credentials
from nfd.kube.heavy import api_client as make_api_client
from nfd.master.api.app import create_app
from nfd.master.core.settings import MasterSettings
from nfd.master.runtime import Runtime, build_runtime

from .helpers import FixtureSource, features_with, serve


def kube_settings(**over: Any) -> MasterSettings:
    s = MasterSettings()
    s.auth.enabled = False
    s.rules.watch = False
    s.kube.qps = 1000
    s.kube.burst = 1000
    s.kube.backoff_base_s = 0.01
    s.kube.backoff_max_s = 0.2
    s.rules.min_interval_s = 0.0
    s.leader.retry_period_s = 0.1
    s.leader.lease_duration_s = 1
    s.leader.renew_deadline_s = 0.6
    s.leader.replicate_interval_s = 0.1
    for k, v in over.items():
        group, _, key = k.partition("__")
        setattr(getattr(s, group), key, v)
    return s


class MasterHandle:
    def __init__(self, client: httpx.Client, runtime: Runtime) -> None:
        self.client = client
        self.runtime = runtime

    def put(
        self, node: str, labels: dict[str, str], *, token: str | None = None, **body: Any
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        payload = {"features": features_with(labels), **body}
        return self.client.put(f"/api/v1/nodes/{node}/features", json=payload, headers=headers)

    def view(self, node: str) -> dict[str, Any]:
        r = self.client.get(f"/api/v1/nodes/{node}")
        r.raise_for_status()
        return r.json()  # type: ignore[no-any-return]

    def settled(self) -> bool:
        pub = self.runtime.publisher
        return pub.idle() and all(
            r.published is not None and r.published >= r.updated and not r.last_error
            for r in self.runtime.service.store
        )


def wait_for(cond: Callable[[], object], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def until(cond: Callable[[], object], what: str, timeout: float = 15.0) -> None:
    """``wait_for`` on the event loop, which the code under test shares."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def kube_master(fake: Any, **over: Any) -> Iterator[MasterHandle]:
    s = kube_settings(**over)
    api_client = make_api_client(Credentials(fake.url), s.kube.parallelism + 6)
    rt = build_runtime(s, api_client=api_client, sources=[FixtureSource()])
    with serve(create_app(runtime=rt)) as url, httpx.Client(base_url=url, timeout=10) as c:
        if rt.elector is not None and not rt.elector.advertise_url:
            rt.elector.advertise_url = url  # what $POD_IP gives in a cluster
        yield MasterHandle(c, rt)
