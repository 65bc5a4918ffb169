"""``nfd master``: the FastAPI service that labels nodes through the API server."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nfd.master.settings import MasterSettings


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
    p.add_argument("--extra-label-ns", action="append", default=[], metavar="NS")
    p.add_argument("--deny-label-ns", action="append", default=[], metavar="NS")
    p.add_argument("--label-whitelist", metavar="REGEX")
    p.add_argument("--enable-taints", action="store_true")
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
    p.add_argument("--enable-leader-election", action="store_true")
    p.add_argument("--tls-cert-file", metavar="FILE")
    p.add_argument("--tls-key-file", metavar="FILE")
    p.add_argument(
        "--max-body-bytes", type=int, metavar="N", help="largest accepted request body (default 2 MiB)"
    )
    p.add_argument("--kube-api-qps", type=float, metavar="N", help="client-side API rate limit (default 10)")
    p.add_argument("--kube-api-burst", type=int, metavar="N", help="client-side API burst (default 100)")
    p.add_argument("--parallelism", type=int, metavar="N", help="nodes written at once (default 10)")


def settings_from_args(args: argparse.Namespace) -> MasterSettings:
    """Settings: defaults < environment (NFD_MASTER_*) < config file < flags."""
    from pathlib import Path

    from nfd.cli import CliError
    from nfd.config import ConfigError, parse_duration
    from nfd.master.masterconfig import load_master_config
    from nfd.master.settings import MasterSettings

    try:
        s = MasterSettings()
    except ValueError as e:
        raise CliError(f"settings from the environment: {e}") from None
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
        s.server.tls_cert_file, s.server.tls_key_file = Path(args.tls_cert_file), Path(args.tls_key_file)
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


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from nfd.cli import CliError
    from nfd.master.app import create_app, serving_app
    from nfd.master.runtime import SetupError, build_runtime

    settings = settings_from_args(args)
    try:
        runtime = build_runtime(settings)
    except SetupError as e:
        raise CliError(str(e), code=1) from None
    app = serving_app(create_app(runtime=runtime))
    srv = settings.server
    config = uvicorn.Config(
        app,
        host=srv.host,
        port=srv.port,
        ssl_certfile=str(srv.tls_cert_file) if srv.tls_cert_file else None,
        ssl_keyfile=str(srv.tls_key_file) if srv.tls_key_file else None,
        log_config=None,  # keep the CLI's logging setup
        access_log=False,  # thousands of workers: access lines would drown everything else
        timeout_keep_alive=75,  # workers keep connections across their 60 s interval
        timeout_graceful_shutdown=10,
    )
    server = _server_class()(config)
    import gc

    # What is imported and built by now lives as long as the process: keep it out of the
    # collector's full passes, which would otherwise walk it again on every one.
    gc.freeze()
    try:
        server.run()  # handles SIGTERM/SIGINT: stops accepting, drains, runs the lifespan's end
    except OSError as e:
        raise CliError(f"cannot serve on {srv.host}:{srv.port}: {e.strerror or e}", code=1) from None
    if not server.started:
        raise CliError(f"could not start on {srv.host}:{srv.port} (see the log above)", code=1)
    return 0


def _server_class() -> type:
    import signal

    import uvicorn

    class Server(uvicorn.Server):
        """SIGTERM is how a Pod is stopped: after the graceful shutdown, exit 0 rather
        than re-raise the signal (uvicorn's default, which reads as a crash)."""

        def handle_exit(self, sig: int, frame: object) -> None:
            super().handle_exit(sig, frame)  # type: ignore[arg-type]
            captured = getattr(self, "_captured_signals", None)
            if sig == signal.SIGTERM and isinstance(captured, list) and sig in captured:
                captured.remove(sig)

    return Server
