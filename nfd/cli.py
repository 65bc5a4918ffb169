"""The ``nfd`` command. Parses, then hands over to one command module, imported only
when that command runs, so ``nfd discover`` never loads the master's libraries.

A command module may also offer ``parse_fast(argv) -> dict | None``: the plain spellings
of its options parsed without argparse (building an argparse parser, with the gettext,
locale and shutil work it does, is a good part of ``nfd discover``'s start-up). It
answers None for anything else (help, abbreviations, errors ...), and argparse parses
as always; tests hold the two equal.
"""

from __future__ import annotations

import os
import sys

from nfd import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (startup time)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import NoReturn, Protocol

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


LOG_LEVELS = ["debug", "info", "warning", "error"]
LOG_FORMATS = ["text", "json"]


def parse_fast(argv: Sequence[str], command: str | None) -> argparse.Namespace | None:
    """``argv`` parsed without argparse when every item is a plain spelling of a global
    option (before the command) or of the command's own options; None otherwise."""
    if command is None:
        return None
    fast = getattr(command_module(command), "parse_fast", None)
    if fast is None:
        return None
    values: dict[str, object] = {
        "log_level": os.environ.get("NFD_LOG_LEVEL", "warning"),
        "log_format": os.environ.get("NFD_LOG_FORMAT", "text"),
    }
    choices = {"--log-level": LOG_LEVELS, "--log-format": LOG_FORMATS}
    i = 0
    while argv[i] != command:
        opt, eq, value = argv[i].partition("=")
        if opt not in choices:
            return None
        if not eq:
            i += 1
            value = argv[i]
        if value not in choices[opt]:
            return None
        values[opt[2:].replace("-", "_")] = value
        i += 1
    own = fast(argv[i + 1 :])
    if own is None:
        return None
    ns: argparse.Namespace = _Namespace(command=command, **values, **own)  # type: ignore[assignment]
    return ns


class _Namespace:
    """What argparse's Namespace is to the commands: attributes from keywords."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or one with just ``only``'s arguments filled in (fast path)."""
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            # argparse prints usage + message and exits 2; keep it to one line.
            raise CliError(message)

    parser = _Parser(prog="nfd", description="Node Feature Discovery for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"nfd {__version__}")
    parser.add_argument(
        "--log-level", default=os.environ.get("NFD_LOG_LEVEL", "warning"),
        choices=LOG_LEVELS, help="log verbosity (default: warning)",
    )  # fmt: skip
    parser.add_argument(
        "--log-format", default=os.environ.get("NFD_LOG_FORMAT", "text"),
        choices=LOG_FORMATS, help="log line format",
    )  # fmt: skip
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, (_module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            command_module(name).add_arguments(p)
    return parser


def setup_logging(level: str, fmt: str, *, command: str) -> None:
    """Root logger to stderr. One-shot commands apply it with their first record (``nfd
    discover`` usually logs nothing, and never imports logging then)."""
    from nfd.lazylog import configure

    configure(level, fmt, now=command not in ONE_SHOT)


# Commands that print and end. Run as a process (not called with an argv, as tests do),
# they leave without the interpreter's teardown, which frees every module and object one
# by one: 3-4 ms on a small VM, a tenth of ``nfd discover``'s run. Long-running commands
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
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.shutdown()
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


def _run(args_list: list[str], command: str | None) -> int:
    prog = f"nfd {command}" if command else "nfd"
    try:
        args = parse_fast(args_list, command) or build_parser(only=command).parse_args(args_list)
        setup_logging(args.log_level, args.log_format, command=args.command)
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
