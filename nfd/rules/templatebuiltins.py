"""text/template's built-in functions (comparison, indexing, printing) with Go's
semantics, for rule templates."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from nfd.rules.govalues import MAX_VALUE, TemplateError, go_float, go_quote, go_rune, go_str, go_type, truth

__all__ = ["BUILTINS"]


def _len(v: Any) -> int:
    if isinstance(v, str | list | tuple | Mapping):
        return len(v)
    raise TemplateError(f"len of type {go_type(v)}")


def _index(v: Any, *keys: Any) -> Any:
    for k in keys:
        if isinstance(v, Mapping):
            # A missing key gives the zero value of the map's element type.
            zero = "" if v and all(isinstance(x, str) for x in v.values()) else None
            v = v.get(k, zero)
        elif isinstance(v, list | tuple | str):
            if not isinstance(k, int) or isinstance(k, bool):
                raise TemplateError(f"cannot index slice/array with type {go_type(k)}")
            if not 0 <= k < len(v):
                raise TemplateError(f"index out of range: {k}")
            v = v[k]
        elif v is None:
            raise TemplateError("index of untyped nil")
        else:
            raise TemplateError(f"can't index item of type {go_type(v)}")
    return v


def _slice(v: Any, *idx: Any) -> Any:
    if not isinstance(v, str | list | tuple):
        raise TemplateError(f"can't slice item of type {go_type(v)}")
    if len(idx) > 2:
        raise TemplateError("too many slice indexes")
    lo = idx[0] if idx else 0
    hi = idx[1] if len(idx) > 1 else len(v)
    if not (0 <= lo <= hi <= len(v)):
        raise TemplateError(f"index out of range: {lo}:{hi}")
    return v[lo:hi]


def _basic(v: Any) -> tuple[str, Any]:
    if isinstance(v, bool):
        return "bool", v
    if isinstance(v, int):
        return "int", v
    if isinstance(v, float):
        return "float", v
    if isinstance(v, str):
        return "string", v
    if v is None:
        return "nil", None
    raise TemplateError("invalid type for comparison")


def _eq(a: Any, *bs: Any) -> bool:
    if not bs:
        raise TemplateError("missing argument for comparison")
    ka, va = _basic(a)
    for b in bs:
        kb, vb = _basic(b)
        if ka != kb:
            if ka == "nil" or kb == "nil":
                if va is None and vb is None:
                    return True
                continue
            raise TemplateError("incompatible types for comparison")
        if va == vb:
            return True
    return False


def _ne(a: Any, b: Any) -> bool:
    return not _eq(a, b)


def _lt(a: Any, b: Any) -> bool:
    ka, va = _basic(a)
    kb, vb = _basic(b)
    if ka in ("bool", "nil") or kb in ("bool", "nil"):
        raise TemplateError("invalid type for comparison")
    if ka != kb:
        raise TemplateError("incompatible types for comparison")
    return bool(va < vb)


def _le(a: Any, b: Any) -> bool:
    return _lt(a, b) or _eq(a, b)


def _gt(a: Any, b: Any) -> bool:
    return not _le(a, b)


def _ge(a: Any, b: Any) -> bool:
    return not _lt(a, b)


def _sprint(*args: Any) -> str:
    # fmt.Sprint: a space between operands when neither side is a string.
    out: list[str] = []
    for i, a in enumerate(args):
        if i > 0 and not isinstance(a, str) and not isinstance(args[i - 1], str):
            out.append(" ")
        out.append(go_str(a))
    return "".join(out)


def _sprintln(*args: Any) -> str:
    return " ".join(go_str(a) for a in args) + "\n"


_VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(?:\.(\d+|\*)?)?([a-zA-Z%])")


def _sprintf(fmt: Any, *args: Any) -> str:
    if not isinstance(fmt, str):
        raise TemplateError(f"printf: format must be a string, not {go_type(fmt)}")
    out: list[str] = []
    argi = 0
    pos = 0
    for m in _VERB.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        flags, width, prec, verb = m.group(1), m.group(2), m.group(3), m.group(4)
        if verb == "%":
            out.append("%")
            continue
        if width == "*" or prec == "*":
            raise TemplateError("printf: '*' width is not supported")
        if _go_num(width) is None or _go_num(prec) is None:
            out.append("%!(NOVERB)")  # Go stops reading the format there
            pos = len(fmt)
            break
        if argi >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        a = args[argi]
        argi += 1
        out.append(_format_one(a, flags, width, prec, verb))
    out.append(fmt[pos:])
    if argi < len(args):
        extra = ", ".join(f"{go_type(a)}={go_str(a)}" for a in args[argi:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def _go_num(digits: str | None) -> int | None:
    """A width or precision as Go's fmt reads it: None where it gives up (its tooLarge)."""
    n = 0
    for ch in digits or "":
        if n > 1_000_000:
            return None
        n = n * 10 + int(ch)
    return n


def _format_one(a: Any, flags: str, width: str | None, prec: str | None, verb: str) -> str:
    if int(width or 0) > MAX_VALUE or int(prec or 0) > MAX_VALUE:
        raise TemplateError(f"printf: a width or precision of more than {MAX_VALUE}")
    pyflags = "".join(f for f in flags if f in "-+ 0#")
    if "-" in pyflags:
        pyflags = pyflags.replace("0", "")
    w = width or ""
    p = f".{prec}" if prec is not None else ""
    bad = f"%!{verb}({go_type(a)}={go_str(a)})"

    def pad(s: str) -> str:
        if not w:
            return s
        n = int(w)
        if "-" in flags:
            return s.ljust(n)
        return s.rjust(n, "0" if "0" in flags and verb not in "sqv" else " ")

    if verb in ("v", "s"):
        if (
            verb == "s"
            and not isinstance(a, str)
            and a is not None
            and not isinstance(a, list | tuple | Mapping)
        ) and isinstance(a, bool | int | float):
            return bad
        s = go_str(a) if a is not None else "%!s(<nil>)" if verb == "s" else "<nil>"
        if prec is not None and isinstance(a, str):
            s = s[: int(prec)]
        return pad(s)
    if verb == "q":
        if isinstance(a, str):
            return pad(go_quote(a))
        if isinstance(a, int) and not isinstance(a, bool):
            return pad("'" + go_rune(a) + "'")
        return bad
    if verb == "t":
        return pad("true" if a else "false") if isinstance(a, bool) else bad
    if verb in "dboxXc":
        if isinstance(a, bool) or not isinstance(a, int):
            if verb in "xX" and isinstance(a, str):
                h = a.encode().hex()
                return pad(h.upper() if verb == "X" else h)
            return bad
        if verb == "c":
            return pad(go_rune(a))
        spec = {"d": "d", "b": "b", "o": "o", "x": "x", "X": "X"}[verb]
        return format(a, f"{pyflags}{w}{spec}")
    if verb in "feEgG":
        if isinstance(a, bool) or not isinstance(a, int | float):
            return bad
        if verb in "gG" and prec is None:
            return pad(go_float(float(a)))
        return format(float(a), f"{pyflags}{w}{p or '.6' if verb in 'feE' else p}{verb}")
    return f"%!{verb}({go_type(a)}={go_str(a)})"


BUILTINS: dict[str, Callable[..., Any]] = {
    # text/template built-ins
    "and": lambda *a: None,  # evaluated lazily by the executor
    "or": lambda *a: None,
    "not": lambda v: not truth(v),
    "len": _len,
    "index": _index,
    "slice": _slice,
    "print": _sprint,
    "printf": _sprintf,
    "println": _sprintln,
    "eq": _eq,
    "ne": _ne,
    "lt": _lt,
    "le": _le,
    "gt": _gt,
    "ge": _ge,
}
