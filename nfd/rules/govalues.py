"""Values as Go's text/template and fmt print and compare them: the shared ground of the
template interpreter and its functions."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class TemplateError(Exception):
    """The template does not parse, or failed while executing."""


# Bounds that keep one template from taking the process's memory or time, where Go's
# engine would spend gigabytes or hours first: the longest string, list or map a
# function may return and a template may print, and the range iterations of one run.
MAX_VALUE = 4 << 20
MAX_ITERATIONS = 100_000  # a node's kernel.config has a few thousand entries


def int64(v: int) -> int:
    """Go's int64 arithmetic, which wraps around."""
    return ((v + 2**63) % 2**64) - 2**63


def go_rune(v: int) -> str:
    """Go's rune of an integer: U+FFFD where it is no Unicode scalar value."""
    return chr(v) if 0 <= v <= 0x10FFFF and not 0xD800 <= v <= 0xDFFF else "\ufffd"


def go_type(v: Any) -> str:
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    if isinstance(v, Mapping):
        return (
            "map[string]string" if all(isinstance(x, str) for x in v.values()) else "map[string]interface {}"
        )
    if isinstance(v, list | tuple):
        return "[]interface {}"
    return type(v).__name__


def go_str(v: Any) -> str:
    """fmt's %v."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, Mapping):
        return "map[" + " ".join(f"{go_str(k)}:{go_str(v[k])}" for k in sorted(v, key=str)) + "]"
    if isinstance(v, list | tuple):
        return "[" + " ".join(go_str(x) for x in v) + "]"
    return str(v)


def go_float(f: float) -> str:
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if math.isnan(f):
        return "NaN"
    r = repr(f)
    if "e" in r:
        mant, exp = r.split("e")
        sign = "-" if exp.startswith("-") else "+"
        digits = exp.lstrip("+-").rjust(2, "0")
        return f"{mant.removesuffix('.0')}e{sign}{digits}"
    if r.endswith(".0"):
        r = r[:-2]
    if abs(f) >= 1e21:
        return f"{f:e}"
    return r


def truth(v: Any) -> bool:
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):
        return v != 0
    if isinstance(v, str | list | tuple | Mapping):
        return len(v) > 0
    return True


def go_quote(s: str) -> str:
    out = ['"']
    for c in s:
        if c in ('"', "\\"):
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)
