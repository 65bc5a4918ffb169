"""``nfd master``: the FastAPI service that labels nodes through the API server."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="master config file (YAML)")
    p.add_argument("--host", default=None, help="address to listen on (default 0.0.0.0)")
    p.add_argument("--port", type=int, default=None, help="port for the API, /healthz, /readyz and /metrics (default 8080)")
    p.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster, then KUBECONFIG)")
    p.add_argument("--no-publish", action="store_true", help="keep nodes in memory; never write to the API server")
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
    p.add_argument("--no-rule-watch", action="store_true", help="do not watch NodeFeatureRule objects in the cluster")
    p.add_argument("--resync-period", metavar="DURATION", help="full resync of every node (default 1h)")
    p.add_argument("--enable-leader-election", action="store_true")
    p.add_argument("--tls-cert-file", metavar="FILE")
    p.add_argument("--tls-key-file", metavar="FILE")
    p.add_argument("--max-body-bytes", type=int, metavar="N", help="largest accepted request body (default 2 MiB)")


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError

    raise CliError("nfd master is not built yet", code=1)
