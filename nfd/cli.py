"""The ``nfd`` command. Parses, then hands over to one command module, imported only
when that command runs, so the node's commands never load the master's libraries.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

from nfd import __version__


class CommandModule(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# command -> (module, one-line help). Each module has add_arguments(parser) and
# run(args) -> int, and imports nothing heavy at module level.
COMMANDS: dict[str, tuple[str, str]] = {
    "discover": ("nfd.commands.discover", "discover this node's features and print its labels"),
    "worker": ("nfd.commands.worker", "node agent: discover and keep the master current"),
    "master": ("nfd.commands.master", "label nodes and advertise resources via the API server"),
    "device-plugin": ("nfd.commands.deviceplugin", "serve kubelet's device-plugin API"),
    "dra": ("nfd.commands.dra", "publish ResourceSlices and serve kubelet's DRA plugin API"),
    "rules": ("nfd.commands.rules", "work with NodeFeatureRule objects offline"),
    "topology-updater": ("nfd.commands.topologyupdater", "publish this node's NodeResourceTopology object"),
    "prune": ("nfd.commands.prune", "remove what nfd set from the cluster's Nodes (after an uninstall)"),
}


class CliError(Exception):
    """A usage or input error: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def command_module(name: str) -> CommandModule:
    module = COMMANDS[name][0]
    __import__(module)
    found: CommandModule = sys.modules[module]
    return found


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS = ["debug", "info", "warning", "error"]
LOG_FORMATS = ["text", "json"]


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, given the terminal's width. Without one it asks shutil,
    and it builds a formatter on every ``add_argument`` (to check the metavar), so every
    command would import shutil (with bz2 and lzma) though no help is printed."""

    def __init__(self, prog: str) -> None:
        try:
            columns = int(os.environ.get("COLUMNS") or 0) or os.get_terminal_size(sys.stdout.fileno()).columns
        except (ValueError, OSError):  # not a terminal (a pipe, a file, a closed stdout)
            columns = 80
        super().__init__(prog, width=max(columns, 40) - 2)


class Parser(argparse.ArgumentParser):
    """The parser of ``nfd`` and ``kubectl nfd`` (and of their sub-commands, as
    ``parser_class``): a usage error is a CliError, said in one line (argparse would print
    the usage and exit 2), and help is as wide as the terminal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise CliError(message)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or one with ``only`` as its one command: a command named on the
    command line needs no other command's parser, and building the seven others would
    be a fifth of ``nfd discover``'s parsing."""

    parser = Parser(prog="nfd", description="Node Feature Discovery for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"nfd {__version__}")
    parser.add_argument(
        "--log-level", default=os.environ.get("NFD_LOG_LEVEL", "warning"),
        choices=LOG_LEVELS, help="log verbosity (default: warning)",
    )  # fmt: skip
    parser.add_argument(
        "--log-format", default=os.environ.get("NFD_LOG_FORMAT", "text"),
        choices=LOG_FORMATS, help="log line format",
    )  # fmt: skip
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, (_module, help_text) in COMMANDS.items():
        if only is None or name == only:
            p = sub.add_parser(name, help=help_text, description=help_text)
            command_module(name).add_arguments(p)
    return parser


def setup_logging(level: str, fmt: str) -> None:
    """One handler on the root logger, writing ``fmt`` ("text" or "json") lines to
    stderr, at ``level`` (debug, info, warning, error)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        from nfd.logfmt import JsonFormatter  # json only for the format that writes it

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


# Commands that print and end. Run as a process (not called with an argv, as tests do),
# they leave without the interpreter's teardown, which frees every module and object one
# by one: 3-4 ms on a small VM. Long-running commands
# end normally, so that libraries' exit handlers run.
ONE_SHOT = frozenset({"discover"})


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args_list if a in COMMANDS), None)
    code = _run(args_list, command)
    if argv is None and command in ONE_SHOT:
        exit_at_once(code, f"nfd {command}")
    return code


def exit_at_once(code: int, prog: str) -> NoReturn:
    """Flush what was written, then end the process with ``code`` and nothing more."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass  # the reader left (``nfd discover | head``): not an error
    except OSError as e:
        print(f"{prog}: error: cannot write the output: {e.strerror or e}", file=sys.stderr)
        code = code or 1
    logging.shutdown()
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


def _parse(args_list: list[str], command: str | None) -> argparse.Namespace:
    try:
        return build_parser(only=command).parse_args(args_list)
    except CliError:
        if command is None:
            raise
        # ``command`` may not be the word argparse takes for the command (``nfd typo
        # discover``): the whole parser's verdict, with every command in its message.
        return build_parser().parse_args(args_list)


def _run(args_list: list[str], command: str | None) -> int:
    prog = f"nfd {command}" if command else "nfd"
    try:
        args = _parse(args_list, command)
        setup_logging(args.log_level, args.log_format)
        return command_module(args.command).run(args)
    except CliError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # never a traceback for the user; NFD_DEBUG=1 shows one
        if os.environ.get("NFD_DEBUG"):
            raise
        print(f"{prog}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
