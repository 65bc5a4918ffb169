"""Loggers for the modules on ``nfd discover``'s start-up path: :mod:`logging` is
imported only when a record is emitted.

Importing logging (with traceback, string, re, threading ...) costs about as much as a
whole discovery pass, and a normal ``nfd discover`` logs nothing. The long-running
commands configure logging at once (:func:`configure` with ``now=True``). ``nfd
discover`` states its configuration in the environment instead (``NFD_LOG_LEVEL``,
``NFD_LOG_FORMAT``, the variables that set it anyway), and the first record that passes
the level applies it, so records look as they would have with logging set up eagerly.
Nothing else on that path imports logging: ``tests/core/test_startup.py`` holds it to
that.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import logging
    from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# logging's level names (logging._nameToLevel), known here without importing logging.
_LEVELS = {
    "CRITICAL": 50, "FATAL": 50, "ERROR": 40, "WARN": 30, "WARNING": 30, "INFO": 20, "DEBUG": 10, "NOTSET": 0,
}  # fmt: skip
# Set by configure(now=False): the configuration waits for the first record.
_DEFERRED = "NFD_LOG_DEFERRED"


def configure(level: str, fmt: str, *, now: bool) -> None:
    """One handler on the root logger, writing ``fmt`` ("text" or "json") lines to
    stderr, at ``level`` (debug, info, warning, error): at once, or (``now=False``) when
    the first record at that level or above is emitted."""
    if level.upper() not in _LEVELS:
        raise ValueError(f"Unknown level: {level.upper()!r}")  # as logging says it, at once
    if now or "logging" in sys.modules:
        apply(level, fmt)
        return
    os.environ.update({"NFD_LOG_LEVEL": level, "NFD_LOG_FORMAT": fmt, _DEFERRED: "1"})


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


def _deferred_level() -> int | None:
    if os.environ.get(_DEFERRED) != "1":
        return None
    return _LEVELS.get(os.environ.get("NFD_LOG_LEVEL", "warning").upper(), 30)


class LazyLogger:
    """The part of :class:`logging.Logger` that nfd's discovery code uses. Records below
    the deferred configuration's level are dropped without importing logging."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def _logger(self, levelno: int) -> logging.Logger | None:
        deferred = _deferred_level()
        if deferred is not None:
            if levelno < deferred:
                return None
            os.environ.pop(_DEFERRED)
            apply(os.environ.get("NFD_LOG_LEVEL", "warning"), os.environ.get("NFD_LOG_FORMAT", "text"))
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
