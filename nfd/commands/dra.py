"""``nfd dra``: publish this node's devices as ResourceSlices and serve kubelet's DRA
plugin API for the resources the device-plugin config marks ``servedBy: dra``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nfd.devices.inventory import ResourceState
    from nfd.features import Features
    from nfd.hostroot import HostRoot

log = logging.getLogger("nfd.dra")


def add_arguments(p: argparse.ArgumentParser) -> None:
    import os

    from nfd.commands._common import add_device_arguments, add_kubeconfig_argument, add_node_name_argument

    add_device_arguments(p, discovers="pci/usb/gpu")
    p.add_argument("--config", metavar="FILE", required=True, help="device config (resources and selectors)")
    add_node_name_argument(p)
    add_kubeconfig_argument(p)
    p.add_argument(
        "--plugin-dir", metavar="DIR",
        help="where the DRA socket and checkpoint live (default /var/lib/kubelet/plugins/<driver>)",
    )  # fmt: skip
    p.add_argument(
        "--registry-dir", metavar="DIR", default="/var/lib/kubelet/plugins_registry",
        help="kubelet's plugin registration directory",
    )  # fmt: skip
    p.add_argument(
        "--pod-uid", metavar="UID", default=os.environ.get("POD_UID", ""),
        help="this pod's UID (default $POD_UID): sockets named with it let the old and the new pod of a"
        " rolling update serve side by side",
    )  # fmt: skip
    p.add_argument(
        "--rediscover-interval", metavar="SECONDS", type=float, default=10.0,
        help="look for devices plugged in or removed this often (default 10; 0: never)",
    )  # fmt: skip
    p.add_argument(
        "--check", action="store_true", help="print the ResourceSlices this node would publish, and exit"
    )
    p.add_argument(
        "--device-classes",
        action="store_true",
        help="print the DeviceClasses for the config's DRA resources, and exit",
    )


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError
    from nfd.commands._common import host_root, light_transport, serve_status, stop_on_signals
    from nfd.commands.deviceplugin import features_for
    from nfd.devices.config import DRA, load_config
    from nfd.devices.inventory import build_served_states, build_states
    from nfd.settings import ConfigError

    try:
        config = load_config(args.config)
    except ConfigError as e:
        raise CliError(str(e)) from None
    if args.device_classes:
        from nfd.dra.classes import device_classes

        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": device_classes(config)}, indent=2))
        return 0
    if args.poll_interval <= 0:
        raise CliError("--poll-interval must be positive")
    if args.rediscover_interval < 0:
        raise CliError("--rediscover-interval must be 0 (never) or positive")
    node = args.node_name
    if not node:
        raise CliError("--node-name (or $NODE_NAME) is required: the pool is named after the node")
    from nfd.policy import dns_subdomain_error

    err = dns_subdomain_error(node)
    if err:
        raise CliError(f"--node-name: {err}")
    from nfd.dra.plugin import instance_error

    err = instance_error(args.pod_uid)
    if err:
        raise CliError(f"--pod-uid: {err}")
    resources = config.served_by(DRA)
    host = host_root(args.host_root)

    def discover() -> tuple[list[ResourceState], Features, HostRoot]:
        feats = features_for(args, host, ("pci", "usb", "gpu"))
        return build_states(resources, features=feats, host=host)[0], feats, host

    feats = features_for(args, host, ("pci", "usb", "gpu"))
    try:
        states, warnings = build_served_states(config.resources, DRA, features=feats, host=host)
    except ConfigError as e:
        raise CliError(f"config file {args.config}: {e}") from None
    if not resources:
        warnings.append(f"{args.config} marks no resource servedBy: dra; publishing an empty pool")

    from nfd.dra.slices import DraInventory, pool_now

    try:
        inventory = DraInventory(states, features=feats, host=host)
    except ValueError as e:
        raise CliError(f"config file {args.config}: {e}") from None
    if args.check:
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        slices = pool_now(
            inventory, driver=config.driver_name, node=node, taint_effect=config.dra.taint_effect
        )
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": slices}, indent=2))
        return 0
    for w in warnings:
        log.warning("%s", w)

    from nfd.dra.driver import DraDriver
    from nfd.dra.publisher import REQUEST_TIMEOUT_S

    api = light_transport(args.kubeconfig, timeout=REQUEST_TIMEOUT_S, user_agent="nfd-dra")
    plugin_dir = args.plugin_dir or f"/var/lib/kubelet/plugins/{config.driver_name}"
    try:
        driver = DraDriver(
            states, inventory, api=api, driver=config.driver_name, node=node,
            plugin_dir=plugin_dir, registry_dir=args.registry_dir, cdi_dir=args.cdi_dir,
            poll_interval=args.poll_interval, rediscover=discover, rediscover_interval=args.rediscover_interval,
            taint_effect=config.dra.taint_effect, instance=args.pod_uid,
        )  # fmt: skip
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from None
    # Ready once kubelet took the plugin: a rolling update stops the old pod only then.
    status = serve_status(driver.registry, args.port, log, driver.plugin.registration)
    try:
        driver.start()
    except (OSError, ValueError) as e:
        raise CliError(str(e)) from None

    def stop() -> None:
        driver.stop()
        if status is not None:
            status.stop()

    stop_on_signals(stop, log)
    print(
        f"serving DRA driver {config.driver_name} for node {node}: {len(inventory.by_name)} device(s)",
        file=sys.stderr,
        flush=True,
    )
    while not driver.wait(1.0):
        pass
    return 0
