"""Reading YAML files the same way everywhere (worker, master and device-plugin configs,
rule files): bounded in size, UTF-8 text only, parsed with libyaml's C loader where
PyYAML has it, and every problem one line that names the file once and says why.

``yaml`` is imported only when a file is read: ``nfd discover`` without a config file
never loads it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

MiB = 1 << 20
# A config file is a few KiB; one with thousands of custom rules a few MiB.
CONFIG_LIMIT = 4 * MiB
# 20,000 rules are 3 MiB and take about 0.3 GB to parse; a bound keeps one stray file
# from taking the master's memory.
RULES_LIMIT = 8 * MiB


class YamlFileError(ValueError):
    """A file that cannot be used: the message starts with the file's name."""


def read_text(path: str, *, limit: int) -> str:
    """The file's text. Raises YamlFileError for a missing, unreadable, oversized,
    non-regular or non-UTF-8 file."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block us
    except FileNotFoundError:
        raise YamlFileError(f"{path}: no such file") from None
    except OSError as e:
        raise YamlFileError(f"{path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise YamlFileError(f"{path}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise YamlFileError(f"{path}: not a regular file")
        if st.st_size > limit:
            raise YamlFileError(f"{path}: {st.st_size} bytes, more than the limit of {_size(limit)}")
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > limit:  # it grew while we read it
                raise YamlFileError(f"{path}: more than the limit of {_size(limit)}")
            chunks.append(chunk)
    except OSError as e:
        raise YamlFileError(f"{path}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise YamlFileError(f"{path}: not UTF-8 text (byte {e.start}); is it a binary file?") from None


def load(path: str, *, limit: int = CONFIG_LIMIT) -> Any:
    """The file's one YAML document (None when empty)."""
    return parse(read_text(path, limit=limit), path)


def load_all(path: str, *, limit: int = RULES_LIMIT) -> list[Any]:
    """The file's YAML documents, empty ones left out."""
    return parse_all(read_text(path, limit=limit), path)


def parse(text: str, name: str) -> Any:
    import yaml

    try:
        return yaml.load(text, Loader=loader())
    except Exception as e:  # PyYAML's constructors raise whatever they meet (see describe)
        raise YamlFileError(f"{name}: not valid YAML: {describe(e)}") from None


def parse_all(text: str, name: str) -> list[Any]:
    import yaml

    try:
        return [d for d in yaml.load_all(text, Loader=loader()) if d is not None]
    except Exception as e:  # PyYAML's constructors raise whatever they meet (see describe)
        raise YamlFileError(f"{name}: not valid YAML: {describe(e)}") from None


def loader() -> Any:
    import yaml

    # libyaml's loader parses several times faster; PyYAML may be built without it.
    return getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


def describe(e: Exception) -> str:
    """Where and why, on one line: ``line 2, column 3: expected ',' or ']'``. PyYAML
    raises a bare ValueError, without a place, for a scalar it cannot build (a date that
    does not exist, a number Python will not convert), and whatever its constructors meet
    for an explicit tag on a value of the wrong form."""
    import yaml

    if not isinstance(e, yaml.YAMLError):
        if "integer string conversion" in str(e):
            return f"a number of more than {sys.get_int_max_str_digits()} digits"
        if isinstance(e, ValueError):
            return " ".join(str(e).split())
        # An explicit tag on a value of another form: !!timestamp x, !!bool 3.
        return "a value its tag does not allow (such as !!bool x)"
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None)
    if problem is None and getattr(e, "reason", None):  # a reader error: a bad character
        return f"character {getattr(e, 'position', 0)}: {e.reason}"  # type: ignore[attr-defined]
    problem = " ".join(str(problem or "syntax error").split())
    if mark is None:
        return problem
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n % MiB == 0 else f"{n} bytes"
