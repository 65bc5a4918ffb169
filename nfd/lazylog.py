"""Loggers that import :mod:`logging` only when a record is emitted, and a logging
configuration that waits for the import.

Importing logging (with traceback, tokenize, threading, string ...) costs about as much
as a whole discovery pass, and a normal ``nfd discover`` logs nothing. So the modules on
that path log through a :class:`LazyLogger`, and the CLI states its configuration with
:func:`configure`: when logging is already loaded it is applied at once; otherwise it is
applied the moment anyone imports logging (a :class:`LazyLogger` with a record to emit,
or a library that uses logging directly), so every record is formatted as it would have
been with logging set up eagerly.

The pending configuration lives in ``sys.meta_path`` (the finder that watches for the
import), not in this module.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import logging
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# logging's level names (logging._nameToLevel), known here without importing logging.
_LEVELS = {
    "CRITICAL": 50, "FATAL": 50, "ERROR": 40, "WARN": 30, "WARNING": 30, "INFO": 20, "DEBUG": 10, "NOTSET": 0,
}  # fmt: skip


def configure(level: str, fmt: str) -> None:
    """One handler on the root logger, writing ``fmt`` ("text" or "json") lines to
    stderr, at ``level`` (debug, info, warning, error). Deferred until logging is
    imported."""
    if level.upper() not in _LEVELS:
        raise ValueError(f"Unknown level: {level.upper()!r}")  # as logging says it, at once
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ConfigureOnImport)]
    if "logging" in sys.modules:
        apply(level, fmt)
    else:
        sys.meta_path.insert(0, _ConfigureOnImport(level, fmt))


def apply(level: str, fmt: str) -> None:
    """:func:`configure`, now."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        from nfd.logfmt import JsonFormatter

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class _ConfigureOnImport:
    """A meta-path finder that finds nothing itself: when ``logging`` is imported it lets
    the other finders find it, and has the loader apply the configuration once the module
    has run."""

    def __init__(self, level: str, fmt: str) -> None:
        self.level = level
        self.fmt = fmt
        self.levelno = _LEVELS.get(level.upper(), 0)

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "logging":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec: ModuleSpec | None = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None:
            return None
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec
        level, fmt = self.level, self.fmt

        def exec_module(module: ModuleType) -> None:
            run(module)
            apply(level, fmt)

        setattr(loader, "exec_module", exec_module)  # noqa: B010 (a method, assigned on this loader only)
        return spec


def _pending_level() -> int | None:
    for f in sys.meta_path:
        if isinstance(f, _ConfigureOnImport):
            return f.levelno
    return None


class LazyLogger:
    """The part of :class:`logging.Logger` that nfd's discovery code uses. Records below
    the pending configuration's level are dropped without importing logging."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def _logger(self, levelno: int) -> logging.Logger | None:
        if "logging" not in sys.modules:
            pending = _pending_level()
            if pending is not None and levelno < pending:
                return None
        import logging

        return logging.getLogger(self.name)

    def _log(self, levelno: int, msg: object, args: tuple[object, ...], kwargs: dict[str, Any]) -> None:
        logger = self._logger(levelno)
        if logger is not None:
            # Records name the caller's file and line, not this module's.
            kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 2
            logger.log(levelno, msg, *args, **kwargs)

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log(10, msg, args, kwargs)

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log(20, msg, args, kwargs)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log(30, msg, args, kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        self._log(40, msg, args, kwargs)

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        kwargs.setdefault("exc_info", True)
        self._log(40, msg, args, kwargs)


def get_logger(name: str) -> LazyLogger:
    return LazyLogger(name)
