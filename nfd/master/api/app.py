"""The FastAPI application: routers, the body limit, and a lifespan that owns the
master's parts (clients, publisher, leader election, rule watch)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp

from nfd import __version__
from nfd.master.api import features, health, nodes, replication, workers
from nfd.master.core.bodylimit import BodyLimit
from nfd.master.core.settings import MasterSettings
from nfd.master.replication.forward import LeaderForward
from nfd.master.runtime import Runtime, build_runtime

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
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.runtime = rt
    app.state.page_builds = asyncio.Semaphore(nodes.PAGE_BUILDS)
    _document_worker_endpoints(app)
    app.include_router(nodes.router)
    app.include_router(features.router)
    app.include_router(health.router)
    app.include_router(replication.router)
    return app


def serving_app(app: FastAPI) -> ASGIApp:
    """What uvicorn serves: the body limit, a follower's forwarding to the leader, then
    the worker endpoints, all in front of FastAPI (its middleware stack costs more than a
    heartbeat's work)."""
    rt: Runtime = app.state.runtime
    inner = LeaderForward(workers.WorkerEndpoints(app, lambda: rt), lambda: rt)
    return BodyLimit(inner, max_bytes=rt.settings.server.max_body_bytes)


def _document_worker_endpoints(app: FastAPI) -> None:
    """The worker endpoints are served in front of FastAPI (``api.workers``); their
    operations and schemas still go into its OpenAPI document, with the body of the
    replicas' hand-over (read raw, so declared by reference)."""
    default = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        from pydantic.json_schema import models_json_schema

        from nfd.master.api.models import HeldRequest

        spec = default()
        _, defs = models_json_schema(
            [(m, "validation") for m in [*workers.openapi_models(), HeldRequest]],
            ref_template="#/components/schemas/{model}",
        )
        spec.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
        node_param = next(
            p for p in spec["paths"]["/api/v1/nodes/{node}"]["get"]["parameters"] if p["name"] == "node"
        )
        spec["paths"].update(workers.openapi_paths(node_param))
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
