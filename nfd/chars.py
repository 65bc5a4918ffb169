"""Character classes of Kubernetes names and label values, checked with ``str`` methods.

Everything on ``nfd discover``'s path uses these instead of :mod:`re`: importing ``re``
(with the ``enum`` and ``functools`` it brings) was a fifth of the whole process. The
classes are ASCII only, as Kubernetes' own expressions are.
"""

from __future__ import annotations

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
HEX = "0123456789abcdefABCDEF"
# Letters, digits, ``-``, ``_`` and ``.``: what a label name part or value may hold.
NAME_CHARS = ALNUM + "-_."


def only(text: str, chars: str) -> bool:
    """Every character of ``text`` is one of ``chars`` (true for "")."""
    # strip() removes the allowed characters from both ends in C; anything left over
    # sits between two allowed runs or is itself not allowed.
    return not text.strip(chars)


def is_name(text: str) -> bool:
    """A Kubernetes name part or non-empty label value: alphanumeric ends, letters,
    digits, ``-_.`` between (no length limit: callers check it)."""
    return bool(text) and text[0] in ALNUM and text[-1] in ALNUM and only(text, NAME_CHARS)


def is_label_value(text: str) -> bool:
    """A valid label value: empty, or a name of at most 63 characters."""
    return text == "" or (len(text) <= 63 and is_name(text))


def is_dns1123_label(text: str) -> bool:
    """Lower-case letters, digits and ``-``, with alphanumeric ends."""
    return bool(text) and text[0] in LOWER_ALNUM and text[-1] in LOWER_ALNUM and only(text, LOWER_ALNUM + "-")


def keep_only(text: str, chars: str) -> str:
    """``text`` without the characters that are not in ``chars``."""
    return text if only(text, chars) else "".join(c for c in text if c in chars)


def replace_others(text: str, chars: str, repl: str, *, runs: bool = False) -> str:
    """``text`` with each character not in ``chars`` replaced by ``repl``; with ``runs``,
    each run of such characters replaced by one ``repl``."""
    if only(text, chars):
        return text
    out: list[str] = []
    in_run = False
    for c in text:
        if c in chars:
            out.append(c)
            in_run = False
        elif not (runs and in_run):
            out.append(repl)
            in_run = True
    return "".join(out)


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
