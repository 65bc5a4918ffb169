"""Request dependencies: the master's parts, reached through the app's state."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request, params

from nfd.master.runtime import Runtime
from nfd.master.security.auth import AuthError
from nfd.master.security.readauth import METRICS, NODES_GET, NODES_LIST, Access


async def get_runtime(request: Request) -> Runtime:
    # async: a plain function would be run in a worker thread, costing more than it does
    rt: Runtime = request.app.state.runtime
    return rt


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def _http_error(e: AuthError) -> HTTPException:
    headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
    if e.status == 503:
        headers = {"Retry-After": "5"}
    return HTTPException(e.status, str(e), headers=headers)


def _reader(access: Access) -> params.Depends:
    """A route dependency: the caller may ``access`` (no check with --no-auth)."""

    async def check(
        rt: RuntimeDep,
        authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
        x_nfd_authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> None:
        if rt.readers is None:
            return
        try:
            # The API server's service proxy drops Authorization once it has
            # authenticated the caller: a reader reaching the master through it (kubectl
            # nfd) sends its token in X-Nfd-Authorization, reviewed the same way.
            await rt.readers.check(authorization or x_nfd_authorization, access)
        except AuthError as e:
            raise _http_error(e) from None

    return Depends(check)  # type: ignore[no-any-return]


ReadsNodeList = _reader(NODES_LIST)
ReadsNode = _reader(NODES_GET)
ReadsMetrics = _reader(METRICS)
