"""``nfd device-plugin``: serve kubelet's device-plugin API for the devices nfd finds."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", required=True, help="device-plugin config (resources and selectors)")
    p.add_argument(
        "--plugin-dir", metavar="DIR", default="/var/lib/kubelet/device-plugins",
        help="kubelet's device-plugin socket directory",
    )  # fmt: skip
    p.add_argument("--cdi-dir", metavar="DIR", default="/var/run/cdi", help="where CDI spec files are written")
    p.add_argument("--host-root", metavar="DIR", help="host filesystem root (default from NFD_HOST_* variables)")
    p.add_argument("--check", action="store_true", help="validate the config against this node, print the devices, exit")


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError

    raise CliError("nfd device-plugin is not built yet", code=1)
