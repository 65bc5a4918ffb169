"""``nfd master``: the FastAPI service that labels nodes through the API server."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    from nfd.commands._common import add_kubeconfig_argument, add_policy_arguments, add_port_argument

    p.add_argument("--config", metavar="FILE", help="master config file (YAML)")
    p.add_argument("--host", default=None, help="address to listen on (default 0.0.0.0)")
    add_port_argument(p, serves="the API, /healthz, /readyz and /metrics", default="8080")
    add_kubeconfig_argument(p, "kubeconfig (default: in-cluster, then KUBECONFIG)")
    p.add_argument(
        "--no-publish", action="store_true", help="keep nodes in memory; never write to the API server"
    )
    p.add_argument("--no-auth", action="store_true", help="accept workers without a token (local use only)")
    p.add_argument("--auth-audience", metavar="AUD", help="audience the workers' projected tokens carry")
    p.add_argument(
        "--worker-service-account", metavar="NS:NAME",
        help="service account workers run as (default node-feature-discovery:nfd-worker)",
    )  # fmt: skip
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
        "--tls-service",
        metavar="NAME",
        help="the Service whose DNS names the certificate carries (default nfd-master)",
    )
    p.add_argument(
        "--tls-dns-name",
        action="append",
        default=[],
        metavar="NAME",
        help="one more name for the certificate",
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
    p.add_argument(
        "--parallelism",
        type=int,
        metavar="N",
        help="ceiling of the node writes in flight; fewer while the API server slows down (default 64)",
    )


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError
    from nfd.commands.master_server import serve
    from nfd.commands.master_settings import settings_from_args
    from nfd.master.api.app import create_app, serving_app
    from nfd.master.runtime import SetupError, build_runtime

    settings = settings_from_args(args)
    try:
        runtime = build_runtime(settings)
    except SetupError as e:
        raise CliError(str(e), code=e.code) from None
    return serve(serving_app(create_app(runtime=runtime)), settings, runtime)
