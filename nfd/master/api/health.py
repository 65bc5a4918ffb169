"""Probes and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from nfd.master.api.deps import ReadsMetrics, RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process serves requests."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "not ready: the cluster's rules are not listed yet"}})
async def readyz(rt: RuntimeDep) -> Response:
    """Ready for workers once the cluster's rules are listed, leader or follower (a
    follower forwards to the leader); ``detail`` says which."""
    ok, why = rt.ready()
    return JSONResponse(
        {"status": "ok" if ok else "not ready", "detail": why, "mode": rt.mode}, 200 if ok else 503
    )


@router.get(
    "/metrics",
    response_class=Response,
    dependencies=[ReadsMetrics],
    responses={401: {"description": "no or bad token"}, 403: {"description": "not allowed: get /metrics"}},
)
async def metrics(rt: RuntimeDep) -> Response:
    """Prometheus metrics (needs a token allowed ``get`` on the non-resource URL /metrics)."""
    return Response(rt.metrics.render(), media_type=CONTENT_TYPE_LATEST)
