"""``nfd worker``: the node agent."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

    from nfd.features import Features
    from nfd.sources import FeatureSource

from nfd import __version__

DEFAULT_TOKEN_FILE = "/var/run/secrets/nfd/token"
# The master's CA certificate, projected next to the token from its ConfigMap.
DEFAULT_CA_FILE = "/var/run/secrets/nfd/ca.crt"
DEFAULT_STATUS_PORT = 8081
# One worker must not be able to flood the master: passes at most once a second.
MIN_SLEEP_INTERVAL_S = 1.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    from nfd.commands._common import (
        add_host_root_argument,
        add_kubeconfig_argument,
        add_node_name_argument,
        add_port_argument,
    )

    p.add_argument("--master", metavar="URL", help="the master's base URL (default $NFD_MASTER_URL)")
    p.add_argument(
        "--publish", choices=["master", "nodefeature", "both"], default="master",
        help="where features go: the master (default), a NodeFeature object in upstream's shape "
        "(for upstream's nfd-master; namespace and owner from POD_NAMESPACE, POD_NAME, POD_UID), or both",
    )  # fmt: skip
    add_kubeconfig_argument(p, "with --publish nodefeature|both outside a pod")
    p.add_argument("--config", metavar="FILE", help="worker config file (nfd-worker.conf)")
    p.add_argument(
        "--oneshot", action="store_true", help="one pass, deliver, exit (non-zero if not delivered)"
    )
    add_node_name_argument(p, env_default=False)
    p.add_argument("--sources", metavar="LIST", help="feature sources (as nfd discover)")
    p.add_argument(
        "--sleep-interval",
        metavar="DURATION",
        help="time between passes, at least 1s; 0 = only at start and on changes "
        "(default core.sleepInterval, 60s)",
    )
    p.add_argument(
        "--token-file", metavar="FILE",
        help="projected ServiceAccount token, read before each request "
        "(default /var/run/secrets/nfd/token when it exists)",
    )  # fmt: skip
    p.add_argument(
        "--ca-file", metavar="FILE",
        help="CA bundle to verify the master's TLS certificate against "
        "(default /var/run/secrets/nfd/ca.crt when it exists, else the system's)",
    )  # fmt: skip
    p.add_argument(
        "--plain-http", action="store_true",
        help="allow an http:// master URL even though the token then travels in cleartext",
    )  # fmt: skip
    add_port_argument(p, serves="/healthz and /metrics", default=f"{DEFAULT_STATUS_PORT}; 0 = off")
    p.add_argument(
        "--device-plugin-config",
        metavar="FILE",
        help="device-plugin config: report the resources it serves to the master (the plugin itself runs as nfd device-plugin)",
    )
    p.add_argument(
        "--plugin-dir", metavar="DIR", help="kubelet's device-plugin directory (with --device-plugin-config)"
    )
    add_host_root_argument(p, reads="sys, proc, etc ...")
    p.add_argument(
        "--retry-max-delay", metavar="DURATION", default="60s",
        help="longest wait between retries while the master is away or busy (default 60s; "
        "at most 2s while it takes no connection)",
    )  # fmt: skip
    p.add_argument(
        "--status-host", metavar="ADDR", default="0.0.0.0",
        help="address the /healthz and /metrics server listens on (default 0.0.0.0)",
    )  # fmt: skip


def _check_ca_file(path: str) -> None:
    """At start, not at the first request: the file must hold PEM certificates."""
    import ssl

    from nfd.cli import CliError

    try:
        ssl.create_default_context(cafile=path)
    except ssl.SSLError as e:  # an OSError too: first
        raise CliError(f"--ca-file {path}: no PEM certificate in it ({e.reason or e})") from None
    except FileNotFoundError:
        raise CliError(f"--ca-file {path}: no such file") from None
    except OSError as e:
        raise CliError(f"--ca-file {path}: {e.strerror or e}") from None


def run(args: argparse.Namespace) -> int:
    import os
    import threading
    from pathlib import Path

    from nfd.backoff import Backoff
    from nfd.cli import CliError
    from nfd.commands._common import host_root, stop_on_signals, worker_config
    from nfd.policy import dns_subdomain_error
    from nfd.settings import ConfigError, parse_duration
    from nfd.sources import UnknownSourceError, default_registry
    from nfd.worker.client import MasterClient
    from nfd.worker.loop import Worker

    log = logging.getLogger("nfd.worker")
    if logging.getLogger().level > logging.DEBUG:
        # APScheduler logs every run at info; at 60 passes an hour that is noise.
        logging.getLogger("apscheduler").setLevel(logging.WARNING)

    node = args.node_name or os.environ.get("NODE_NAME", "")
    if not node:
        raise CliError("no node name: give --node-name or set NODE_NAME", code=2)
    bad_name = dns_subdomain_error(node)
    if bad_name:
        origin = "--node-name" if args.node_name else "NODE_NAME"
        raise CliError(f"{origin} {node!r}: not a node name: {bad_name}")
    master = args.master or os.environ.get("NFD_MASTER_URL", "")
    if not master and args.publish != "nodefeature":
        raise CliError("no master: give --master URL or set NFD_MASTER_URL", code=2)

    config = worker_config(args.config, warn=lambda w: log.warning("%s", w))
    try:
        interval = (
            parse_duration(args.sleep_interval, where="--sleep-interval")
            if args.sleep_interval
            else config.core.sleep_interval
        )
        retry_cap = parse_duration(args.retry_max_delay, where="--retry-max-delay")
    except ConfigError as e:
        raise CliError(str(e)) from None
    if retry_cap <= 0:
        raise CliError("--retry-max-delay: must be more than 0")
    if 0 < interval < MIN_SLEEP_INTERVAL_S:
        origin = f"--sleep-interval {args.sleep_interval}" if args.sleep_interval else "core.sleepInterval"
        raise CliError(
            f"{origin}: below the minimum of {MIN_SLEEP_INTERVAL_S:g}s (0 turns periodic passes off)"
        )

    host = host_root(args.host_root)

    try:
        spec = args.sources.split(",") if args.sources else list(config.core.feature_sources)
        sources = default_registry().select(spec)
    except UnknownSourceError as e:
        raise CliError(str(e)) from None

    token_file: Path | None = None
    if args.token_file:
        token_file = Path(args.token_file)
    elif os.path.exists(DEFAULT_TOKEN_FILE):
        token_file = Path(DEFAULT_TOKEN_FILE)
    if args.ca_file:
        _check_ca_file(args.ca_file)
    ca_file = args.ca_file
    if ca_file is None and master.startswith("https:") and os.path.isfile(DEFAULT_CA_FILE):
        ca_file = DEFAULT_CA_FILE
    if master.startswith("http://") and token_file is not None and not args.plain_http:
        raise CliError(
            f"--master {master}: the token would travel in cleartext; use https:// "
            "(the master serves TLS by default) or give --plain-http"
        )

    plugin_resources: Callable[[Features], list[str]] | None = None
    if args.device_plugin_config:
        # The device plugin's own config reader and device matching (no gRPC in them):
        # a resource is reported while a device for it is present, as the plugin serves it.
        from nfd.deviceplugin.view import served_resources
        from nfd.devices.config import load_config

        try:
            plugin_config = load_config(args.device_plugin_config)
        except ConfigError as e:
            raise CliError(f"--device-plugin-config: {e}") from None

        def plugin_resources(features: Features) -> list[str]:
            return served_resources(plugin_config, features=features, host=host)

    client: Any = None
    if args.publish != "nodefeature":
        try:
            client = MasterClient(master, token_file=token_file, ca_file=ca_file)
        except ValueError as e:
            raise CliError(str(e)) from None
    if args.publish != "master":
        from nfd.labels import node_labels
        from nfd.worker.nodefeature_publisher import Both, NodeFeaturePublisher

        label_sources = default_registry().select(list(config.core.label_sources))

        def labels_of(features: Features) -> dict[str, str]:
            return node_labels(label_sources, features, config).labels

        from nfd.commands._common import light_transport
        from nfd.worker.client import DEFAULT_TIMEOUT

        try:
            api = light_transport(args.kubeconfig, timeout=DEFAULT_TIMEOUT, user_agent="nfd-worker")
        except CliError as e:  # no in-cluster config and no usable kubeconfig
            raise CliError(f"--publish {args.publish}: no Kubernetes API access: {e}") from None
        publisher = NodeFeaturePublisher(
            api,
            namespace=os.environ.get("POD_NAMESPACE") or "node-feature-discovery",
            labels_of=labels_of,
            pod_name=os.environ.get("POD_NAME", ""),
            pod_uid=os.environ.get("POD_UID", ""),
        )
        client = publisher if client is None else Both(client, publisher)

    metrics = None
    port = DEFAULT_STATUS_PORT if args.port is None else args.port
    if not 0 <= port <= 65535:
        raise CliError(f"--port {port}: expected 0 (off) to 65535")
    if args.plugin_dir:
        log.info("--plugin-dir is not used: the device plugin runs as nfd device-plugin")
    if not args.oneshot and port:
        from nfd.worker.metrics import WorkerMetrics

        metrics = WorkerMetrics(node)
    worker = Worker(
        node=node,
        sources=sources,
        host=host,
        config=config.sources,
        client=client,
        metrics=metrics,
        backoff=Backoff(cap=retry_cap),
        device_plugin_resources=plugin_resources or (),
        oneshot=args.oneshot,
        next_change=_features_d_expiry(sources),
    )

    if args.oneshot:
        outcome = worker.run_pass()
        client.close()
        if not outcome.delivered:
            raise CliError(f"features not delivered: {outcome.reason}", code=1)
        print(f"nfd worker: {outcome.reason} (node {node})", file=sys.stderr)
        return 0

    from nfd.sources.local import features_dir
    from nfd.worker.agent import Agent
    from nfd.worker.hotplug import UdevMonitor

    names = {s.name for s in sources}
    try:
        agent = Agent(
            worker,
            interval=interval,
            features_dir=features_dir(host, config.sources) if "local" in names else None,
            monitor=UdevMonitor() if names & {"pci", "usb"} else None,
            metrics=metrics,
            status_host=args.status_host,
            status_port=port or None,
        )
    except OSError as e:
        raise CliError(f"cannot serve /healthz and /metrics on port {port}: {e.strerror or e}") from None

    stop = threading.Event()
    stop_on_signals(stop.set, log)
    log.info(
        "nfd worker %s for node %s: master %s, every %gs, sources %s",
        __version__, node, master, interval, ",".join(sorted(names)) or "none",
    )  # fmt: skip
    agent.run_until(stop)
    return 0


def _features_d_expiry(sources: list[FeatureSource]) -> Callable[[Features], datetime | None] | None:
    """When the features change by themselves: the local source's next features.d
    ``expiry-time`` (a pass is scheduled then, whatever the interval)."""
    from nfd.sources.local import LocalSource

    local = next((s for s in sources if isinstance(s, LocalSource)), None)
    if local is None:
        return None
    return lambda _features: local.next_expiry
