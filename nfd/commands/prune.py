"""``nfd prune``: remove from the cluster's Nodes what nfd set on them, the NodeFeature
objects its workers wrote and the ResourceSlices its DRA driver published (after an
uninstall; see docs/deploy.md)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    from nfd.commands._common import add_kubeconfig_argument

    add_kubeconfig_argument(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--node",
        action="append",
        metavar="NAME",
        help="prune this Node only (repeatable; default: every Node)",
    )
    which.add_argument(
        "-l", "--selector", metavar="SELECTOR", default="",
        help="prune the Nodes this label selector selects (e.g. 'pool=gpu')",
    )  # fmt: skip
    p.add_argument(
        "--dra-driver",
        action="append",
        metavar="NAME",
        help="delete the ResourceSlices of this DRA driver name (repeatable; default:"
        " nfd's default driver name, nfd.node.kubernetes.io)",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be removed; change nothing")


def run(args: argparse.Namespace) -> int:
    import asyncio
    import sys

    from nfd.cli import CliError
    from nfd.commands._common import api_client
    from nfd.devices.config import DEFAULT_DRIVER_NAME, driver_name_error
    from nfd.kube.errors import ApiError
    from nfd.master.core.kube import KubeApi
    from nfd.master.core.settings import KubeSettings
    from nfd.master.publishing.prune import Pruner

    drivers = tuple(dict.fromkeys(args.dra_driver or [DEFAULT_DRIVER_NAME]))
    for d in drivers:
        if err := driver_name_error(d):
            raise CliError(f"--dra-driver: {err}")
    settings = KubeSettings()
    api = KubeApi(api_client(args.kubeconfig, settings.parallelism + 6), settings)
    pruner = Pruner(
        api,
        dry_run=args.dry_run,
        drivers=drivers,
        parallelism=settings.parallelism,
        page_size=settings.list_page_size,
        report=lambda line: print(line, flush=True),
    )
    try:
        result = asyncio.run(pruner.run(names=args.node, selector=args.selector))
    except ApiError as e:
        if e.status == 400 and args.selector:  # the API server could not parse it
            raise CliError(f"--selector {args.selector!r}: {e}") from None
        raise CliError(f"cannot list nodes: {e}", code=1) from None
    finally:
        api.close()
    items = _count(sum(len(p.items()) for p in result.nodes), "item")
    nodes = _count(len(result.nodes), "node")
    objects = _count(len(result.nodefeatures), "NodeFeature object")
    slices = _count(len(result.resourceslices), "ResourceSlice")
    if args.dry_run:
        print(f"dry run: would remove {items} from {nodes}, delete {objects} and {slices}")
    else:
        print(f"removed {items} from {nodes}, deleted {objects} and {slices}")
    for err in result.errors:
        print(f"nfd prune: error: {err}", file=sys.stderr)
    return 1 if result.errors else 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
