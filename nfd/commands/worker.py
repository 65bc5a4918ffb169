"""``nfd worker``: the node agent."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", metavar="URL", help="the master's base URL (default $NFD_MASTER_URL)")
    p.add_argument("--config", metavar="FILE", help="worker config file (nfd-worker.conf)")
    p.add_argument("--oneshot", action="store_true", help="one pass, deliver, exit (non-zero if not delivered)")
    p.add_argument("--node-name", metavar="NAME", help="this node's name (default $NODE_NAME)")
    p.add_argument("--sources", metavar="LIST", help="feature sources (as nfd discover)")
    p.add_argument("--sleep-interval", metavar="DURATION", help="time between passes (default core.sleepInterval, 60s)")
    p.add_argument(
        "--token-file", metavar="FILE",
        help="projected ServiceAccount token, read before each request "
        "(default /var/run/secrets/nfd/token when it exists)",
    )  # fmt: skip
    p.add_argument("--ca-file", metavar="FILE", help="CA bundle to verify the master's TLS certificate")
    p.add_argument("--port", type=int, default=None, help="port for /healthz and /metrics (default 8081; 0 = off)")
    p.add_argument("--device-plugin-config", metavar="FILE", help="also run the device plugin with this config")
    p.add_argument("--plugin-dir", metavar="DIR", help="kubelet's device-plugin directory (with --device-plugin-config)")


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError

    raise CliError("nfd worker is not built yet", code=1)
