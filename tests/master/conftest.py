from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from nfd.master.api.app import create_app
from nfd.master.core.settings import MasterSettings
from nfd.master.runtime import build_runtime

from .helpers import FixtureSource, serve


def memory_settings(**over: Any) -> MasterSettings:
    s = MasterSettings()
    s.auth.enabled = False
    s.kube.publish = False
    s.rules.watch = False
    for k, v in over.items():
        group, _, key = k.partition("__")
        setattr(getattr(s, group), key, v)
    return s


@pytest.fixture
def master() -> Iterator[Callable[..., httpx.Client]]:
    """Start an in-memory master (settings overridable: ``policy__enable_taints=True``);
    returns a keep-alive client bound to it."""
    stack: list[Any] = []

    def start(**over: Any) -> httpx.Client:
        rt = build_runtime(memory_settings(**over), sources=[FixtureSource()])
        loops: list[asyncio.AbstractEventLoop] = []
        start_runtime = rt.start

        async def start_noting_the_loop() -> None:
            loops.append(asyncio.get_running_loop())
            await start_runtime()

        rt.start = start_noting_the_loop  # type: ignore[method-assign]
        cm = serve(create_app(runtime=rt))
        url = cm.__enter__()
        client = httpx.Client(base_url=url, timeout=10)
        client.runtime = rt  # type: ignore[attr-defined]
        client.loop = loops[0]  # type: ignore[attr-defined]  # the master's event loop
        stack.append((cm, client))
        return client

    yield start
    for cm, client in reversed(stack):
        client.close()
        cm.__exit__(None, None, None)
