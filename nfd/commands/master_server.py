"""``nfd master``'s HTTP server: uvicorn on a socket bound first, the certificate it
serves with (given, or the cluster's, kept renewed while serving), and a shutdown that
hands the lease over and drains before exiting 0."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from nfd.master.core.settings import MasterSettings
    from nfd.master.runtime import Runtime
    from nfd.master.security.tls import ServingFiles


def serve(app: ASGIApp, settings: MasterSettings, runtime: Runtime) -> int:
    """Serve ``app`` until SIGTERM or SIGINT; 0 once drained."""
    import uvicorn

    from nfd.cli import CliError

    srv = settings.server
    # Bound here, not by uvicorn, and first: a port in use is a one-line error (exit 2),
    # not an ERROR record, and nothing (a certificate made, a warning) happens before it.
    try:
        sock = _listen(srv.host, srv.port)
    except OSError as e:
        raise CliError(f"cannot listen on {srv.host}:{srv.port}: {e.strerror or e}") from None
    try:
        files = _serving_files(settings, runtime)
    except BaseException:
        sock.close()
        raise
    if files is not None and runtime.forwarder.ca_file is None:
        # Followers forward to the leader over the same TLS: trust the replicas' CA (or a
        # self-signed certificate of your own).
        runtime.forwarder.ca_file = str(files.ca or files.cert)
    if files is not None and runtime.forwarder.server_name is None:
        from nfd.master.security.certs import first_dns_name

        # The leader serves the certificate we do: verify it by a name that carries
        # (an unreadable file: uvicorn says so next).
        try:
            runtime.forwarder.server_name = first_dns_name(files.cert.read_bytes())
        except OSError:
            pass
    config = uvicorn.Config(
        app,
        host=srv.host,
        port=srv.port,
        ssl_certfile=str(files.cert) if files else None,
        ssl_keyfile=str(files.key) if files else None,
        log_config=None,  # keep the CLI's logging setup
        access_log=False,  # thousands of workers: access lines would drown everything else
        timeout_keep_alive=75,  # workers keep connections across their 60 s interval
        timeout_graceful_shutdown=10,
    )
    server = _server_class()(config)
    if runtime.elector is not None:
        server.step_down = runtime.elector.stop
    if files is not None and settings.tls.cert_file is None and runtime.api is not None:
        # The cluster's certificate: kept renewed.
        server.renew = (runtime.jobs, runtime.api, settings.tls, files)
    import gc

    host, port = sock.getsockname()[:2]
    server.url = f"{'https' if files is not None else 'http'}://{_url_host(host)}:{port}"
    # What is imported and built by now lives as long as the process: keep it out of the
    # collector's full passes, which would otherwise walk it again on every one.
    gc.freeze()
    try:
        server.run(sockets=[sock])  # handles SIGTERM/SIGINT: stops accepting, drains, runs the lifespan's end
    except OSError as e:
        raise CliError(f"cannot serve on {srv.host}:{srv.port}: {e.strerror or e}", code=1) from None
    finally:
        if server.renew is not None and files is not None:  # the private copy of the key goes with us
            import shutil

            shutil.rmtree(files.cert.parent, ignore_errors=True)
        sock.close()
    if not server.started:
        raise CliError(f"could not start on {srv.host}:{srv.port} (see the log above)", code=1)
    return 0


def _serving_files(settings: MasterSettings, runtime: Runtime) -> ServingFiles | None:
    """Certificate and key files to serve with: given ones, else the cluster's (made or
    renewed at need; transient API errors are retried for about a minute); None for
    plain HTTP."""
    import asyncio
    import logging
    import time

    from nfd.backoff import Backoff
    from nfd.cli import CliError
    from nfd.kube.errors import ApiError
    from nfd.master.security.tls import ServingFiles, TLSError, ensure_certificate, write_files

    log = logging.getLogger("nfd.master")
    t = settings.tls
    if t.cert_file is not None and t.key_file is not None:
        return ServingFiles(t.cert_file, t.key_file)
    if not t.enabled:
        log.warning("TLS is OFF (--no-tls): workers' tokens and features travel in cleartext")
        return None
    if runtime.api is None:
        log.warning("no cluster to keep a certificate in and no --tls-cert-file: serving plain HTTP")
        return None
    backoff, deadline = Backoff(initial=1.0, cap=10.0, jitter=0), time.monotonic() + 60
    while True:
        try:
            return write_files(asyncio.run(ensure_certificate(runtime.api, t)))
        except TLSError as e:
            raise CliError(f"TLS: {e}", code=1) from None
        except OSError as e:  # the private copy for uvicorn: $TMPDIR must be writable
            raise CliError(f"TLS: cannot write the certificate for serving: {e}", code=1) from None
        except ApiError as e:
            delay = backoff.next_delay()
            if time.monotonic() + delay > deadline:
                raise CliError(f"TLS: cannot reach the API server for the certificate: {e}", code=1) from None
            log.warning("TLS: the API server is not answering (%s); retrying in %.0f s", e, delay)
            time.sleep(delay)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _server_class() -> type:
    import asyncio
    import logging
    import signal
    from collections.abc import Awaitable, Callable
    from typing import Any

    import uvicorn

    class Server(uvicorn.Server):
        """SIGTERM is how a Pod is stopped: after the graceful shutdown, exit 0 rather
        than re-raise the signal (uvicorn's default, which reads as a crash). With
        ``renew`` set, the cluster's certificate is kept renewed while serving."""

        renew: tuple[Any, Any, Any, Any] | None = None
        # Called as shutdown starts: a draining leader hands the lease over at once, not
        # after its connections close (followers' idle TLS connections can hold that up
        # for the whole graceful timeout).
        step_down: Callable[[], Awaitable[None]] | None = None

        url = ""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                # uvicorn names the address only when it binds the socket itself.
                logging.getLogger("nfd.master").info("running on %s", self.url)
            if self.renew is not None and self.config.ssl is not None:
                from functools import partial

                from nfd.master.security.tls import RENEW_EVERY_S, RENEW_JOB_ID, renew_checked

                jobs, api, settings, files = self.renew
                renew = partial(renew_checked, api, settings, files, self.config.ssl)
                jobs.every(RENEW_EVERY_S, renew, job_id=RENEW_JOB_ID)

        async def shutdown(self, sockets: Any = None) -> None:
            if self.renew is not None:
                from nfd.master.security.tls import RENEW_JOB_ID

                self.renew[0].cancel(RENEW_JOB_ID)
            if self.step_down is not None:
                await self.step_down()
            await super().shutdown(sockets)

        async def _wait_tasks_to_complete(self) -> None:
            # shutdown() has closed the idle keep-alive connections, but over TLS asyncio
            # then waits (up to 30 s) for the client's close_notify, which an idle pooled
            # connection (a follower's, a worker's) never sends: drop those outright so a
            # drain ends when the last response is sent, not at the graceful timeout.
            while self.server_state.connections and not self.force_exit:
                for conn in list(self.server_state.connections):
                    transport = getattr(conn, "transport", None)
                    if transport is not None and transport.is_closing():
                        transport.abort()
                await asyncio.sleep(0.05)
            await super()._wait_tasks_to_complete()

        def handle_exit(self, sig: int, frame: object) -> None:
            super().handle_exit(sig, frame)  # type: ignore[arg-type]
            captured = getattr(self, "_captured_signals", None)
            if sig == signal.SIGTERM and isinstance(captured, list) and sig in captured:
                captured.remove(sig)

    return Server
