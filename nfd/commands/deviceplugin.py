"""``nfd device-plugin``: serve kubelet's device-plugin API for the devices nfd finds."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nfd.devices.inventory import ResourceState
    from nfd.features import Features
    from nfd.hostroot import HostRoot

log = logging.getLogger("nfd.deviceplugin")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from nfd.commands._common import add_device_arguments

    add_device_arguments(p, discovers="pci/usb")
    p.add_argument(
        "--config", metavar="FILE", required=True, help="device-plugin config (resources and selectors)"
    )
    p.add_argument(
        "--plugin-dir", metavar="DIR", default="/var/lib/kubelet/device-plugins",
        help="kubelet's device-plugin socket directory",
    )  # fmt: skip
    p.add_argument(
        "--check", action="store_true", help="validate the config against this node, print the devices, exit"
    )


def features_for(
    args: argparse.Namespace, host: HostRoot, sources: tuple[str, ...] = ("pci", "usb")
) -> Features:
    """``--features`` when given, else what the named sources discover on ``host``."""
    from nfd.cli import CliError
    from nfd.features import FeatureFormatError, Features

    if args.features:
        from nfd.yamlfile import RULES_LIMIT, YamlFileError, read_text

        try:
            # Bounded, UTF-8, never blocking on a FIFO: as every file a user names.
            data = json.loads(read_text(args.features, limit=RULES_LIMIT))
            # Also take `nfd discover -o json` output and the worker's report, which
            # hold the features under a "features" key.
            if isinstance(data, dict) and isinstance(data.get("features"), dict):
                data = data["features"]
            return Features.from_dict(data)
        except YamlFileError as e:
            raise CliError(f"--features {e}") from None
        except FeatureFormatError as e:
            raise CliError(f"--features {args.features}: {e}") from None
        except ValueError as e:  # JSONDecodeError, or a number Python will not convert
            raise CliError(f"--features {args.features}: not JSON ({' '.join(str(e).split())})") from None
    from nfd.config import SourcesConfig
    from nfd.discovery import discover
    from nfd.sources import default_registry

    return discover(default_registry().select(list(sources)), host, SourcesConfig()).features


def _print_check(states: list[ResourceState]) -> None:
    for s in states:
        print(
            f"{s.name}: {len(s.physical_ids)} device(s), {s.healthy_slots()} of {len(s.slots)} allocatable"
            f" ({s.res.kind.describe(s.res.selector)})"
        )
        for (pid, d), reason in zip(s.devices(), s.reasons(), strict=True):
            numa = "-" if d.numa_node is None else str(d.numa_node)
            health = "Healthy" if reason is None else f"Unhealthy ({reason})"
            nodes = ",".join(n.host_path for n in d.device_nodes) or "-"
            print(f"  {pid}  {health}  numa={numa}  nodes={nodes}")


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError
    from nfd.commands._common import host_root, serve_status, stop_on_signals
    from nfd.devices.config import DEVICE_PLUGIN, load_config
    from nfd.devices.inventory import build_served_states
    from nfd.settings import ConfigError

    try:
        config = load_config(args.config)
    except ConfigError as e:
        raise CliError(str(e)) from None
    if args.poll_interval <= 0:
        raise CliError("--poll-interval must be positive")
    host = host_root(args.host_root)
    resources = config.served_by(DEVICE_PLUGIN)
    feats = features_for(args, host)
    try:
        states, warnings = build_served_states(config.resources, DEVICE_PLUGIN, features=feats, host=host)
    except ConfigError as e:
        raise CliError(f"config file {args.config}: {e}") from None
    if len(resources) < len(config.resources):
        log.info(
            "%d resource(s) are served through DRA (nfd dra), not here",
            len(config.resources) - len(resources),
        )
    if not config.resources:
        warnings.append(f"{args.config} declares no resources; nothing to serve")
    if args.check:
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        _print_check(states)
        return 0
    for w in warnings:
        log.warning("%s", w)

    from nfd.deviceplugin.manager import Manager, socket_path_error

    if not os.path.isdir(args.plugin_dir):
        raise CliError(
            f"--plugin-dir {args.plugin_dir} is not a directory (mount kubelet's device-plugins directory)"
        )
    err = socket_path_error(args.plugin_dir, [s.name for s in states])
    if err:
        raise CliError(err)
    from nfd.deviceplugin.metrics import DevicePluginMetrics

    metrics = DevicePluginMetrics()
    manager = Manager(
        states,
        plugin_dir=args.plugin_dir,
        cdi_dir=args.cdi_dir,
        poll_interval=args.poll_interval,
        metrics=metrics,
    )
    manager.health.subscribe(metrics.health.changed)
    status = serve_status(metrics, args.port, log)

    def stop() -> None:
        manager.stop()
        if status is not None:
            status.stop()

    stop_on_signals(stop, log)
    manager.start()
    print(f"serving: {', '.join(manager.served_resources()) or '(nothing)'}", file=sys.stderr, flush=True)
    while not manager.wait(1.0):
        pass
    rejected = manager.rejected()
    stop()
    return 1 if rejected and not manager.served_resources() else 0
