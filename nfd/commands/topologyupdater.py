"""``nfd topology-updater``: publish this node's NodeResourceTopology object from
kubelet's PodResources API, the NUMA layout and the Topology Manager policy."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nfd.topology.config import TopologyConfig
    from nfd.topology.metrics import TopologyMetrics
    from nfd.worker.metrics import StatusServer

log = logging.getLogger("nfd.topology")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from nfd.commands._common import add_host_root_argument, add_kubeconfig_argument, add_node_name_argument

    add_node_name_argument(p)
    add_kubeconfig_argument(p)
    p.add_argument(
        "--config", metavar="FILE",
        help="config file (nfd-topology-updater.conf): excludeList, the resources left out per node",
    )  # fmt: skip
    p.add_argument(
        "--podresources-socket", metavar="PATH", default="/var/lib/kubelet/pod-resources/kubelet.sock",
        help="kubelet's PodResources socket",
    )  # fmt: skip
    p.add_argument(
        "--kubelet-config", metavar="FILE", default="/var/lib/kubelet/config.yaml",
        help="kubelet's config file (or a saved configz answer) for the Topology Manager policy and scope; "
        "'' leaves them out",
    )  # fmt: skip
    p.add_argument("--interval", metavar="SECONDS", type=float, default=10.0,
                   help="PodResources poll interval and the least time between two writes (default 10)")  # fmt: skip
    add_host_root_argument(p)
    p.add_argument("--oneshot", action="store_true", help="one pass, then exit")
    p.add_argument("--no-publish", action="store_true",
                   help="print the object as JSON instead of writing it (no API server needed)")  # fmt: skip
    p.add_argument(
        "--port", metavar="PORT", type=int, default=0,
        help="serve Prometheus /metrics (and /healthz) on this port (default 0: off)",
    )  # fmt: skip


def _check(args: argparse.Namespace) -> None:
    from nfd.cli import CliError

    if not args.node_name:
        raise CliError("--node-name (or $NODE_NAME) is required")
    if not args.interval > 0:
        raise CliError(f"--interval {args.interval}: must be positive")
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: must be 0 to 65535")


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError
    from nfd.commands._common import host_root, stop_on_signals
    from nfd.topology.updater import Settings, Updater

    _check(args)
    settings = Settings(
        node_name=args.node_name,
        host=host_root(args.host_root),
        socket=args.podresources_socket,
        kubelet_config=args.kubelet_config or None,
        interval=args.interval,
        exclude=_config(args.config).excluded(args.node_name),
    )
    metrics, server = _metrics_server(args)
    scan_failed = metrics.scan_failed if metrics is not None else (lambda: None)
    if args.no_publish:
        shown: list[str] = []

        def show(obj: dict[str, Any]) -> bool:
            text = json.dumps(obj, indent=2)
            if shown[-1:] != [text]:  # like a write: only when it changed
                print(text, flush=True)
                shown[:] = [text]
            return False

        updater = Updater(settings, publish=show, on_scan_error=scan_failed)
        if args.oneshot:
            updater.run_once()
            return 0 if updater.last is not None else 1
    else:
        from nfd.commands._common import light_transport
        from nfd.topology.podwatch import PodWatch
        from nfd.topology.writer import NrtWriter

        try:
            api = light_transport(args.kubeconfig, user_agent="nfd-topology-updater")
        except CliError as e:
            raise CliError(f"no cluster to write to: {e} (use --no-publish to print instead)") from None
        writer = NrtWriter(api)
        updater = Updater(
            settings,
            publish=writer.write,
            node_uid=lambda: writer.node_uid(settings.node_name),
            on_scan_error=scan_failed,
        )
        pods = PodWatch(api, settings.node_name, on_change=updater.nudge)
        updater.is_exclusive = pods.is_exclusive
        updater.requested = pods.requested

        def stop() -> None:
            updater.stop()
            pods.stop()
            api.abort()  # a write under way: the next updater writes the object again

        if not args.oneshot:  # before the wait below, which a stopped Pod must not sit out
            stop_on_signals(stop, log)
        pods.start()
        # Pinned CPUs are judged from the pods; wait briefly for the first listing.
        if not pods.wait_synced(10.0) and not pods.stopped:
            log.warning(
                "no pod listing for node %s yet; taking kubelet's CPU assignments as they are",
                settings.node_name,
            )
        if args.oneshot:
            updater.run_once()
            pods.stop()
            return 0 if updater.last is not None else 1

    if args.no_publish:
        stop_on_signals(updater.stop, log)
    print(
        f"topology updater for node {settings.node_name}: every {settings.interval:g}s",
        file=sys.stderr,
        flush=True,
    )
    if server is not None:
        server.start()
    try:
        updater.run()
    finally:
        if server is not None:
            server.stop()
    return 0


def _config(path: str | None) -> TopologyConfig:
    from nfd.commands._common import config_file
    from nfd.topology.config import TopologyConfig

    return config_file(path, TopologyConfig, warn=log.warning)


def _metrics_server(args: argparse.Namespace) -> tuple[TopologyMetrics | None, StatusServer | None]:
    """The metrics and the server for them, bound (not serving yet); (None, None) without
    --port or with --oneshot. A port in use is a one-line error."""
    if not args.port or args.oneshot:
        return None, None
    from nfd.cli import CliError
    from nfd.topology.metrics import TopologyMetrics
    from nfd.worker.metrics import StatusServer

    metrics = TopologyMetrics()
    try:
        server = StatusServer(metrics, lambda: (True, "ok"), port=args.port)
    except OSError as e:
        raise CliError(f"cannot serve /metrics on port {args.port}: {e.strerror or e}") from None
    return metrics, server
