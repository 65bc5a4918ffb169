"""What several commands take from their arguments the same way: the host root and the
worker config file. Errors become CliError (one line, exit 2)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from nfd.config import WorkerConfig
    from nfd.hostroot import HostRoot


def host_root(path: str | None) -> HostRoot:
    """``--host-root DIR`` (every part below DIR), else the NFD_HOST_* environment."""
    import os

    from nfd.cli import CliError
    from nfd.hostroot import HostRoot

    if path is None:
        return HostRoot.from_env()
    if not os.path.isdir(path):
        reason = "not a directory" if os.path.exists(path) else "no such directory"
        raise CliError(f"--host-root {path}: {reason}")
    return HostRoot.under(path)


def worker_config(path: str | None, *, warn: Callable[[str], None]) -> WorkerConfig:
    """The worker config file's settings (defaults without one); unknown keys are passed
    to ``warn``."""
    from nfd.cli import CliError
    from nfd.config import ConfigError, WorkerConfig, load_worker_config

    if not path:
        return WorkerConfig()
    try:
        config, warnings = load_worker_config(path)
    except ConfigError as e:
        raise CliError(str(e)) from None
    for w in warnings:
        warn(w)
    return config


def add_policy_arguments(p: argparse.ArgumentParser, *, master: bool) -> None:
    """The publishing policy's flags, as the master takes them (``master``: with the
    label whitelist and taints, which ``nfd discover`` has no use for)."""
    p.add_argument(
        "--extra-label-ns", action="append", default=[], metavar="NS",
        help="also allow labels in namespace NS, even a denied one (repeatable, or comma-separated)",
    )  # fmt: skip
    p.add_argument(
        "--deny-label-ns", action="append", default=[], metavar="NS",
        help="refuse labels in namespace NS; '*.example.com' refuses its subdomains, '*' all (repeatable)",
    )  # fmt: skip
    if master:
        p.add_argument(
            "--label-whitelist", metavar="REGEX",
            help="publish only labels whose name (after the namespace) matches REGEX",
        )  # fmt: skip
        p.add_argument(
            "--enable-taints", action="store_true",
            help="let rules taint the node (without it, taints are reported as rejected)",
        )  # fmt: skip


def add_device_arguments(p: argparse.ArgumentParser, *, discovers: str) -> None:
    """The flags ``nfd device-plugin`` and ``nfd dra`` share: where CDI specs go, the
    host, the features to select devices from (``discovers``: the sources read without
    ``--features``) and the health poll."""
    p.add_argument(
        "--cdi-dir", metavar="DIR", default="/var/run/cdi", help="where CDI spec files are written"
    )
    p.add_argument(
        "--host-root", metavar="DIR", help="host filesystem root (default from NFD_HOST_* variables)"
    )
    p.add_argument(
        "--features", metavar="FILE",
        help=f"use these raw features (upstream JSON shape, or `nfd discover -o json` output) "
        f"instead of discovering {discovers}",
    )  # fmt: skip
    p.add_argument(
        "--poll-interval", metavar="SECONDS", type=float, default=0.2,
        help="device health poll interval (default 0.2)",
    )  # fmt: skip
