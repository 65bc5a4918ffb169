"""``nfd rules``: NodeFeatureRule objects, offline."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="rules_command", metavar="SUBCOMMAND", parser_class=type(p))
    sub.required = True
    t = sub.add_parser("test", help="print what rules set for one node")
    t.add_argument("--rules", metavar="FILE", required=True, action="append", help="YAML with NodeFeatureRule objects (repeatable)")
    src = t.add_mutually_exclusive_group()
    src.add_argument("--features", metavar="FILE", help="raw features, upstream's JSON shape (or nfd discover -o json)")
    src.add_argument("--local", action="store_true", help="discover this machine's features (default)")
    t.add_argument("--host-root", metavar="DIR", help="with --local: host filesystem root")
    t.add_argument("--output", "-o", choices=["text", "json"], default="text")
    t.add_argument("--explain", action="store_true", help="say for each rule whether it matched, and why not")
    t.add_argument("--enable-taints", action="store_true")
    t.add_argument("--extra-label-ns", action="append", default=[], metavar="NS")
    t.add_argument("--deny-label-ns", action="append", default=[], metavar="NS")
    t.add_argument("--label-whitelist", metavar="REGEX")


def run(args: argparse.Namespace) -> int:
    from nfd.cli import CliError

    raise CliError("nfd rules is not built yet", code=1)
