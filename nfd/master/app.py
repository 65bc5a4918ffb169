"""The FastAPI application: routers, the body limit, and a lifespan that owns the
master's parts (clients, publisher, leader election, rule watch)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from nfd import __version__
from nfd.master.api import health, nodes
from nfd.master.bodylimit import BodyLimit
from nfd.master.runtime import Runtime, build_runtime
from nfd.master.settings import MasterSettings

log = logging.getLogger(__name__)


def create_app(settings: MasterSettings | None = None, *, runtime: Runtime | None = None) -> FastAPI:
    """An app around ``runtime`` (tests build their own) or one built from ``settings``."""
    rt = runtime or build_runtime(settings or MasterSettings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        s = rt.settings
        log.warning(
            "nfd master %s: %s mode%s", __version__, rt.mode,
            "" if rt.mode == "kubernetes" else " (nodes kept in memory, nothing written to the API server)",
        )  # fmt: skip
        if not s.auth.enabled:
            log.warning("worker authentication is OFF (--no-auth): any client may set any node's features")
        await rt.start()
        try:
            yield
        finally:
            await rt.stop()

    app = FastAPI(
        title="nfd master",
        version=__version__,
        summary="Node Feature Discovery master: workers' raw features in, node labels out.",
        lifespan=lifespan,
    )
    app.state.runtime = rt
    app.include_router(nodes.router)
    app.include_router(health.router)
    app.add_middleware(BodyLimit, max_bytes=rt.settings.server.max_body_bytes)
    return app
