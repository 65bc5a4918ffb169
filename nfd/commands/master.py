"""``nfd master``: the FastAPI service that labels nodes through the API server."""

from __future__ import annotations

import argparse
import re
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

    from nfd.master.runtime import Runtime
    from nfd.master.settings import MasterSettings
    from nfd.master.tls import ServingFiles


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="master config file (YAML)")
    p.add_argument("--host", default=None, help="address to listen on (default 0.0.0.0)")
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help="port for the API, /healthz, /readyz and /metrics (default 8080)",
    )
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster, then KUBECONFIG)")
    p.add_argument(
        "--no-publish", action="store_true", help="keep nodes in memory; never write to the API server"
    )
    p.add_argument("--no-auth", action="store_true", help="accept workers without a token (local use only)")
    p.add_argument("--auth-audience", metavar="AUD", help="audience the workers' projected tokens carry")
    p.add_argument(
        "--worker-service-account", metavar="NS:NAME",
        help="service account workers run as (default node-feature-discovery:nfd-worker)",
    )  # fmt: skip
    from nfd.commands._common import add_policy_arguments

    add_policy_arguments(p, master=True)
    p.add_argument("--rules-dir", metavar="DIR", help="directory of NodeFeatureRule YAML files")
    p.add_argument(
        "--no-rule-watch", action="store_true", help="do not watch NodeFeatureRule objects in the cluster"
    )
    p.add_argument(
        "--gc-interval",
        metavar="DURATION",
        help="how often the leader deletes NodeFeature objects (and forgets what it holds) of "
        "nodes that no longer exist (default 1h; 0 turns it off)",
    )
    p.add_argument(
        "--no-nodefeature-watch",
        action="store_true",
        help="do not read NodeFeature objects (from upstream's workers, GPU feature discovery ...)",
    )
    p.add_argument("--resync-period", metavar="DURATION", help="full resync of every node (default 1h)")
    p.add_argument(
        "--enable-leader-election", action="store_true",
        help="several masters: one leads and writes Nodes, the others stand by (a Lease)",
    )  # fmt: skip
    p.add_argument(
        "--tls-cert-file", metavar="FILE",
        help="serving certificate (PEM; with --tls-key-file): your own, instead of the one the master makes",
    )  # fmt: skip
    p.add_argument("--tls-key-file", metavar="FILE", help="the serving certificate's key (PEM)")
    p.add_argument(
        "--no-tls", action="store_true",
        help="serve plain HTTP (workers then need --plain-http); without a cluster and without "
        "--tls-cert-file the master serves plain HTTP anyway",
    )  # fmt: skip
    p.add_argument(
        "--tls-secret", metavar="NAME",
        help="Secret (in $POD_NAMESPACE) the master keeps its CA and certificate in (default nfd-master-tls)",
    )  # fmt: skip
    p.add_argument(
        "--tls-ca-configmap", metavar="NAME",
        help="ConfigMap the master publishes its CA certificate in, as ca.crt (default nfd-master-ca)",
    )  # fmt: skip
    p.add_argument(
        "--tls-service", metavar="NAME", help="the Service whose DNS names the certificate carries (default nfd-master)"
    )
    p.add_argument(
        "--tls-dns-name", action="append", default=[], metavar="NAME", help="one more name for the certificate"
    )
    p.add_argument(
        "--max-body-bytes", type=int, metavar="N", help="largest accepted request body (default 2 MiB)"
    )
    p.add_argument(
        "--kube-api-qps",
        type=float,
        metavar="N",
        help="client-side API write rate ceiling; lowered while the API server pushes back (default 500)",
    )
    p.add_argument("--kube-api-burst", type=int, metavar="N", help="client-side API burst (default 100)")
    p.add_argument("--parallelism", type=int, metavar="N", help="nodes written at once (default 10)")


_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def settings_from_args(args: argparse.Namespace) -> MasterSettings:
    """Settings: defaults < environment (NFD_MASTER_*) < config file < flags."""
    from pathlib import Path

    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from nfd.cli import CliError
    from nfd.config import ConfigError, parse_duration
    from nfd.master.masterconfig import load_master_config
    from nfd.master.settings import MasterSettings

    try:
        s = MasterSettings()
    except ValidationError as e:
        raise CliError(f"environment: {_env_errors(e)}") from None
    except SettingsError as e:  # a group variable (NFD_MASTER_KUBE) that is not JSON
        raise CliError(f"environment: {' '.join(str(e).split())}") from None
    if args.config:
        try:
            warnings = load_master_config(args.config, s)
        except ConfigError as e:
            raise CliError(str(e)) from None
        import logging

        for w in warnings:
            logging.getLogger("nfd.master").warning("%s", w)
    if args.host is not None:
        s.server.host = args.host
    if args.port is not None:
        s.server.port = args.port
    if args.max_body_bytes is not None:
        if args.max_body_bytes <= 0:
            raise CliError("--max-body-bytes must be positive")
        s.server.max_body_bytes = args.max_body_bytes
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise CliError("--tls-cert-file and --tls-key-file go together")
    if args.tls_cert_file:
        for flag, f in (("--tls-cert-file", args.tls_cert_file), ("--tls-key-file", args.tls_key_file)):
            if not Path(f).is_file():
                raise CliError(f"{flag} {f}: no such file")
        s.tls.cert_file, s.tls.key_file = Path(args.tls_cert_file), Path(args.tls_key_file)
    if args.no_tls:
        if args.tls_cert_file:
            raise CliError("--no-tls and --tls-cert-file contradict each other")
        s.tls.enabled = False
    for flag, attr, val in (
        ("--tls-secret", "secret_name", args.tls_secret),
        ("--tls-ca-configmap", "ca_configmap", args.tls_ca_configmap),
        ("--tls-service", "service_name", args.tls_service),
    ):
        if val is not None:
            if not _DNS_NAME.match(val):
                raise CliError(f"{flag} {val!r}: expected a lowercase DNS name (a-z, 0-9, '-', '.')")
            setattr(s.tls, attr, val)
    for name in args.tls_dns_name:
        if not _DNS_NAME.match(name):
            raise CliError(f"--tls-dns-name {name!r}: expected a lowercase DNS name (a-z, 0-9, '-', '.')")
    s.tls.extra_dns_names += args.tls_dns_name
    if args.kubeconfig:
        if not Path(args.kubeconfig).is_file():
            raise CliError(f"--kubeconfig {args.kubeconfig}: no such file")
        s.kube.kubeconfig = Path(args.kubeconfig)
    if args.no_publish:
        s.kube.publish = False
    if args.no_auth:
        s.auth.enabled = False
    if args.auth_audience:
        s.auth.audience = args.auth_audience
    if args.worker_service_account:
        ns, sep, name = args.worker_service_account.partition(":")
        if not sep or not ns or not name:
            raise CliError("--worker-service-account: expected NAMESPACE:NAME")
        s.auth.worker_service_account = args.worker_service_account
    s.policy.extra_label_ns += args.extra_label_ns
    s.policy.deny_label_ns += args.deny_label_ns
    if args.label_whitelist is not None:
        s.policy.label_whitelist = args.label_whitelist
    if args.enable_taints:
        s.policy.enable_taints = True
    if args.rules_dir:
        if not Path(args.rules_dir).is_dir():
            raise CliError(f"--rules-dir {args.rules_dir}: no such directory")
        s.rules.rules_dir = Path(args.rules_dir)
    if args.no_rule_watch:
        s.rules.watch = False
    if args.no_nodefeature_watch:
        s.nodefeatures.watch = False
    if args.resync_period:
        try:
            period = parse_duration(args.resync_period, where="--resync-period")
        except ConfigError as e:
            raise CliError(str(e)) from None
        if period <= 0:
            raise CliError("--resync-period must be positive")
        s.kube.resync_period_s = period
    if args.gc_interval:
        try:
            gc_every = parse_duration(args.gc_interval, where="--gc-interval")
        except ConfigError as e:
            raise CliError(str(e)) from None
        if gc_every < 0:
            raise CliError("--gc-interval must not be negative")
        if gc_every == 0:
            s.nodefeatures.gc = False
        else:
            s.nodefeatures.gc_interval_s = gc_every
    if args.enable_leader_election:
        s.leader.enabled = True
    for flag, attr, val in (
        ("--kube-api-qps", "qps", args.kube_api_qps),
        ("--kube-api-burst", "burst", args.kube_api_burst),
        ("--parallelism", "parallelism", args.parallelism),
    ):
        if val is not None:
            if val <= 0:
                raise CliError(f"{flag} must be positive")
            setattr(s.kube, attr, val)
    return s


def _env_errors(e: ValidationError) -> str:
    """pydantic's report on one line: each variable by its name, and why."""
    from nfd.validation import error_line

    return error_line(e, lambda loc: "NFD_MASTER_" + "__".join(str(p) for p in loc).upper(), every=True)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from nfd.cli import CliError
    from nfd.master.app import create_app, serving_app
    from nfd.master.runtime import SetupError, build_runtime

    settings = settings_from_args(args)
    try:
        runtime = build_runtime(settings)
    except SetupError as e:
        raise CliError(str(e), code=e.code) from None
    app = serving_app(create_app(runtime=runtime))
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
        server.renew = (runtime.api, settings.tls, files)  # the cluster's certificate: kept renewed
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

    from nfd.cli import CliError
    from nfd.master.kube import KubeError
    from nfd.master.tls import ServingFiles, TLSError, ensure_certificate, write_files

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
    delay, deadline = 1.0, time.monotonic() + 60
    while True:
        try:
            return write_files(asyncio.run(ensure_certificate(runtime.api, t)))
        except TLSError as e:
            raise CliError(f"TLS: {e}", code=1) from None
        except OSError as e:  # the private copy for uvicorn: $TMPDIR must be writable
            raise CliError(f"TLS: cannot write the certificate for serving: {e}", code=1) from None
        except KubeError as e:
            if time.monotonic() + delay > deadline:
                raise CliError(f"TLS: cannot reach the API server for the certificate: {e}", code=1) from None
            log.warning("TLS: the API server is not answering (%s); retrying in %.0f s", e, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


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

        renew: tuple[Any, Any, Any] | None = None
        # Called as shutdown starts: a draining leader hands the lease over at once, not
        # after its connections close (followers' idle TLS connections can hold that up
        # for the whole graceful timeout).
        step_down: Callable[[], Awaitable[None]] | None = None
        _renewing: asyncio.Task[None] | None = None

        url = ""

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                # uvicorn names the address only when it binds the socket itself.
                logging.getLogger("nfd.master").info("running on %s", self.url)
            if self.renew is not None and self.config.ssl is not None:
                from nfd.master.tls import keep_renewed

                api, settings, files = self.renew
                self._renewing = asyncio.create_task(keep_renewed(api, settings, files, self.config.ssl))

        async def shutdown(self, sockets: Any = None) -> None:
            if self._renewing is not None:
                self._renewing.cancel()
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
