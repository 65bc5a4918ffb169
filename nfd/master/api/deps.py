"""Request dependencies: the master's parts, reached through the app's state."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from nfd.master.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    # async: a plain function would be run in a worker thread, costing more than it does
    rt: Runtime = request.app.state.runtime
    return rt


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
