"""Values from host files and users' input, made fit for a one-line message or a
terminal."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` for a log line or a terminal: control characters (ESC, NUL, newlines ...)
    written as Python escapes (``\\x1b``), so that a name from a host file can neither
    forge log lines nor drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown(value: object, width: int = 60) -> str:
    """A value from a user's file in a one-line message: a whole number too long for
    64 bits as its size (Python will not print one of thousands of digits), anything
    else as its repr, cut at ``width``."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a number of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
