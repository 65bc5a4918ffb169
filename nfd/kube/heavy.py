"""The heavy transport: the ``kubernetes`` package's ApiClient, for the master (the
package its owner named; its cost, about 37 MiB of RSS, is paid once per cluster, not
per node). Every request is built from its path (``serialize``: the client's host,
default headers and credentials) and sent by ``send`` through the client's connection
pool, never through the package's generated API classes, which with the models they
load would cost some 24 MiB more. Built from the same ``Credentials`` as the light
transport: the same CA, client certificate and token (read again for each request)."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator, Mapping
from typing import Any

from nfd.kube.config import Credentials
from nfd.kube.errors import ApiError, Unreachable, from_response
from nfd.kube.transport import JSON, Count, counted, request_name


def api_client(creds: Credentials, pool_size: int) -> Any:
    """kubernetes' ApiClient for ``creds`` with ``pool_size`` connections and without
    urllib3's own retries (ours have backoff, jitter and a fresh read on 409)."""
    import urllib3
    from kubernetes import client

    conf = client.Configuration(host=creds.server.rstrip("/"))
    conf.connection_pool_maxsize = pool_size
    conf.retries = 0
    if creds.token or creds.token_file or creds.exec_plugin:
        conf.api_key_prefix = {"BearerToken": "Bearer"}
        conf.api_key = {"BearerToken": creds.bearer() or ""}
        # kubelet rotates a bound token, a plugin's expires: ask for it on each request
        if creds.token_file or creds.exec_plugin:

            def refresh(c: Any) -> None:
                c.api_key["BearerToken"] = creds.bearer() or ""

            conf.refresh_api_key_hook = refresh  # type: ignore[assignment]  # typed None in its stubs
    ac = client.ApiClient(conf)
    ac.user_agent = "nfd"  # as the light transport says, not the generator's name
    ctx = creds.ssl_context()
    if ctx is not None:
        # The one TLS context (CA and client certificate from data or files alike), in
        # place of the one the client would build from file names.
        # urllib3 sets the context's verify_mode from cert_reqs: say it as the context does.
        verify: dict[str, Any] = (
            {"cert_reqs": "CERT_NONE", "assert_hostname": False} if creds.insecure else {}
        )
        ac.rest_client.pool_manager = urllib3.PoolManager(
            num_pools=4, maxsize=pool_size, ssl_context=ctx, retries=False, **verify
        )
    return ac


def tls_context(api_client: Any) -> ssl.SSLContext | None:
    """The TLS context an ``api_client`` made above connects with: the credentials' one,
    which it gave the client's pool; None for plain HTTP."""
    return api_client.rest_client.pool_manager.connection_pool_kw.get("ssl_context")  # type: ignore[no-any-return]


def from_exception(e: BaseException) -> ApiError:
    """What the kubernetes client (or urllib3 under it) raised, as an ApiError."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(e, ApiError):
        return e
    if not isinstance(e, ApiException) or not e.status:
        cause = getattr(e, "reason", None) or e
        return Unreachable(
            None, f"{type(e).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}".rstrip(": ")
        )
    headers = e.headers or {}
    ra = headers.get("Retry-After") if hasattr(headers, "get") else None
    return from_response(int(e.status), e.body, ra, str(e.reason or "").strip() or "request")


def serialize(
    api_client: Any,
    method: str,
    path: str,
    query: Mapping[str, str] | None = None,
    content_type: str | None = None,
) -> tuple[str, str, dict[str, str]]:
    """(method, URL, headers) of a request as ``api_client`` builds it: its host, default
    headers and credentials (the bearer token asked for again when it rotates).
    ``path`` quoted already (``transport.path``); empty query values left out."""
    headers = {"Accept": JSON}
    if content_type:
        headers["Content-Type"] = content_type
    method, url, headers, _, _ = api_client.param_serialize(
        method=method,
        resource_path=path,
        # A list even when empty: the place where a query-string credential would go.
        query_params=[(k, v) for k, v in (query or {}).items() if v],
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    return method, url, headers


def send(
    api_client: Any,
    method: str,
    path: str,
    query: Mapping[str, str] | None = None,
    *,
    body: Any = None,
    content_type: str = JSON,
    timeout: Any = None,
    count: Count | None = None,
    headers: Mapping[str, str] | None = None,
) -> Any:
    """Blocking: one request through ``api_client``'s connection pool, counted; the raw
    urllib3 response, its body unread. An error status or no answer raises the
    ``nfd.kube.errors`` error for it. ``method`` WATCH: a GET of a watch, named so in
    messages. ``timeout``: seconds, or (connect, read); ``headers`` added to the client's."""
    from kubernetes.client.exceptions import ApiException

    verb = "GET" if method == "WATCH" else method
    what = request_name(method, path)
    verb, url, sent = serialize(api_client, verb, path, query, content_type if body is not None else None)
    try:
        resp = api_client.call_api(
            verb, url, header_params={**sent, **(headers or {})}, body=body, _request_timeout=timeout
        )
    except ApiException as e:  # the REST client's own: a TLS failure, no status
        counted(count, verb, url, e.status or None)
        if not e.status:
            raise Unreachable(None, f"{what}: {e.reason}") from None
        raise from_response(int(e.status), e.body, (e.headers or {}).get("Retry-After"), what) from None
    except ApiError:
        raise
    except Exception as e:  # urllib3's and the socket's: no answer
        counted(count, verb, url, None)
        cause = getattr(e, "reason", None) or e
        raise Unreachable(None, f"{what}: {str(cause).splitlines()[0]}") from None
    status = int(resp.status)
    counted(count, verb, url, status)
    if not 200 <= status <= 299:
        raise from_response(status, resp.read(), resp.getheader("Retry-After"), what)
    return resp.response


def lines(resp: Any) -> Iterator[bytes]:
    """The lines of a streamed answer that are not blank (a watch: a JSON event a line),
    as its chunks come; bytes, for the decoder to take as they are."""
    buf = b""
    for chunk in resp.stream(64 * 1024, decode_content=False):
        buf += chunk
        *done, buf = buf.split(b"\n")
        for line in done:
            if line.strip():
                yield line
    if buf.strip():
        yield buf


class HeavyTransport:
    """The transport interface over an ApiClient (plain JSON in and out: no model
    objects), sending as the master's KubeApi does (``send``)."""

    def __init__(
        self, api_client: Any, creds: Credentials, *, timeout: float = 30.0, count: Count | None = None
    ) -> None:
        self.api_client = api_client
        self.creds = creds
        self.timeout = timeout
        self.count = count
        self._aborted = False
        self._streams: set[Any] = set()

    def _send(
        self, method: str, path: str, body: Any, content_type: str, timeout: Any,
        headers: Mapping[str, str] | None = None,
    ) -> Any:  # fmt: skip
        if self._aborted:
            raise Unreachable(None, f"{request_name(method, path)}: stopping")
        return send(
            self.api_client, method, path, body=body, content_type=content_type, timeout=timeout,
            count=self.count, headers=headers,
        )  # fmt: skip

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        resp = self._send(method, path, body, content_type, timeout or self.timeout, headers)
        raw = resp.data  # read whole, and the connection back to the pool
        try:
            doc = json.loads(raw) if raw else {}
        except ValueError:
            raise ApiError(resp.status, f"{method} {path}: the answer is not JSON") from None
        if not isinstance(doc, dict):
            raise ApiError(resp.status, f"{method} {path}: the answer is not a JSON object")
        return doc

    def watch(self, path: str, *, timeout: float) -> Iterator[dict[str, Any]]:
        resp = self._send("WATCH", path, None, JSON, (10, timeout))
        what = request_name("WATCH", path)
        self._streams.add(resp)
        try:
            for line in lines(resp):
                yield json.loads(line)
        except (OSError, ValueError) as e:
            raise Unreachable(None, f"{what}: {e}") from None
        except Exception as e:  # urllib3's ProtocolError, ReadTimeoutError
            raise Unreachable(None, f"{what}: {'stopping' if self._aborted else e}") from None
        finally:
            self._streams.discard(resp)
            resp.close()  # a stream left midway must not go back to the pool as it is
            resp.release_conn()

    def abort(self) -> None:
        self._aborted = True
        for resp in list(self._streams):
            try:
                resp.shutdown()  # unblocks the reading thread (urllib3 >= 2.3)
            except (OSError, ValueError, RuntimeError, AttributeError):
                pass

    def close(self) -> None:
        self.api_client.close()
