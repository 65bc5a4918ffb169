"""The Sprig functions upstream's rule templates use (strings, numbers, defaults, lists
and dicts, regular expressions), with Sprig's semantics: the piped value is the last
argument and conversions are as lenient as Sprig's."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from nfd.rules.govalues import MAX_VALUE, TemplateError, go_quote, go_str, go_type, int64, truth

__all__ = ["SPRIG"]


def _to_int(v: Any) -> int:
    # Sprig converts with spf13/cast: numbers and numeric strings; anything else is 0.
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return int64(v)
    if isinstance(v, float):
        return int64(int(v)) if math.isfinite(v) else -(2**63)  # Go's int64(NaN) on amd64
    if isinstance(v, str):
        s = v.strip()
        try:
            if re.fullmatch(r"[+-]?0[xX][0-9a-fA-F]+", s):
                return int64(int(s, 16))
            if re.fullmatch(r"[+-]?\d+", s):
                return int64(int(s, 10))
            return _to_int(float(s))
        except ValueError:
            return 0
    return 0


def _to_float(v: Any) -> float:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return 0.0
    return 0.0


def _atoi(s: Any) -> int:
    return int(s) if isinstance(s, str) and re.fullmatch(r"[+-]?\d+", s) else 0


def _str(v: Any) -> str:
    return "" if v is None else go_str(v)


def _as_list(v: Any, fn: str) -> list[Any]:
    if isinstance(v, list | tuple):
        return list(v)
    raise TemplateError(f"Cannot find {fn} on type {go_type(v)}")


def _first(v: Any) -> Any:
    lst = _as_list(v, "first")
    return lst[0] if lst else None


def _last(v: Any) -> Any:
    lst = _as_list(v, "last")
    return lst[-1] if lst else None


def _rest(v: Any) -> Any:
    lst = _as_list(v, "rest")
    return lst[1:] if lst else None


def _initial(v: Any) -> Any:
    lst = _as_list(v, "initial")
    return lst[:-1] if lst else None


def _substr(start: Any, end: Any, s: Any) -> str:
    text = _str(s)
    lo, hi = _to_int(start), _to_int(end)
    if lo < 0:
        return text[:hi]
    if hi < 0 or hi > len(text):
        return text[lo:]
    return text[lo:hi]


def _trunc(n: Any, s: Any) -> str:
    text = _str(s)
    count = _to_int(n)
    if count < 0 and len(text) + count > 0:
        return text[len(text) + count :]
    if count >= 0 and len(text) > count:
        return text[:count]
    return text


def _title(s: Any) -> str:
    return re.sub(r"(^|(?<=\s))(\w)", lambda m: m.group(2).upper(), _str(s))


def _empty(v: Any) -> bool:
    return not truth(v)


def _default(d: Any, *given: Any) -> Any:
    if not given or _empty(given[0]):
        return d
    return given[0]


def _go_repl(repl: str) -> str:
    # Go's $1 / ${1} / ${name} expansion -> Python's \g<1>.
    out = repl.replace("\\", "\\\\")
    out = re.sub(r"\$\{(\w+)\}", r"\\g<\1>", out)
    return re.sub(r"\$(\d+)", r"\\g<\1>", out)


def _regex_find_all(regex: str, s: str, n: Any) -> list[str]:
    found = [m.group() for m in re.finditer(regex, s)]
    n = _to_int(n)
    return found if n < 0 else found[:n]


def _regex_split(regex: str, s: str, n: Any) -> list[str]:
    n = _to_int(n)
    if n == 0:
        return []
    parts = re.split(regex, s, maxsplit=0 if n < 0 else n - 1)
    return parts


def _sort_alpha(v: Any) -> list[str]:
    return sorted(_str(x) for x in _as_list(v, "sortAlpha"))


def _uniq(v: Any) -> list[Any]:
    out: list[Any] = []
    for x in _as_list(v, "uniq"):
        if x not in out:
            out.append(x)
    return out


def _dict(*kv: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i in range(0, len(kv), 2):
        out[_str(kv[i])] = kv[i + 1] if i + 1 < len(kv) else ""
    return out


def _keys(*ds: Any) -> list[str]:
    out: list[str] = []
    for d in ds:
        if not isinstance(d, Mapping):
            raise TemplateError(f"keys of type {go_type(d)}")
        out.extend(d)
    return out


def _max(a: Any, *rest: Any) -> int:
    return max([_to_int(a), *(_to_int(x) for x in rest)])


def _min(a: Any, *rest: Any) -> int:
    return min([_to_int(a), *(_to_int(x) for x in rest)])


def _mul(*factors: int) -> int:
    product = 1
    for f in factors:  # wrapped at each step, as Go's int64 is: no huge intermediate
        product = int64(product * f)
    return product


def _repeat(n: Any, s: Any) -> str:
    text, count = _str(s), max(_to_int(n), 0)
    if len(text) * count > MAX_VALUE:
        raise TemplateError(f"{len(text) * count} characters, more than the limit of {MAX_VALUE}")
    return text * count


def _div(a: Any, b: Any) -> int:
    x, y = _to_int(a), _to_int(b)
    if y == 0:
        raise TemplateError("integer divide by zero")
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y >= 0) else -q


def _mod(a: Any, b: Any) -> int:
    x, y = _to_int(a), _to_int(b)
    if y == 0:
        raise TemplateError("integer divide by zero")
    return x - _div(x, y) * y


def _b64dec(s: str) -> str:
    # Sprig returns Go's error text as the value instead of failing.
    try:
        return base64.b64decode(s.encode(), validate=True).decode(errors="replace")
    except ValueError:
        bad = next((i for i, c in enumerate(s) if not (c.isalnum() or c in "+/=")), len(s))
        return f"illegal base64 data at input byte {bad}"


def _to_json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


SPRIG: dict[str, Callable[..., Any]] = {
    # Sprig: strings
    "trim": lambda s: _str(s).strip(" \t\n\r\v\f\x85\xa0"),
    "trimAll": lambda cut, s: _str(s).strip(_str(cut)),
    "trimPrefix": lambda p, s: _str(s).removeprefix(_str(p)),
    "trimSuffix": lambda p, s: _str(s).removesuffix(_str(p)),
    "upper": lambda s: _str(s).upper(),
    "lower": lambda s: _str(s).lower(),
    "title": _title,
    "repeat": _repeat,
    "substr": _substr,
    "trunc": _trunc,
    "nospace": lambda s: re.sub(r"\s", "", _str(s)),
    "contains": lambda sub, s: _str(sub) in _str(s),
    "hasPrefix": lambda p, s: _str(s).startswith(_str(p)),
    "hasSuffix": lambda p, s: _str(s).endswith(_str(p)),
    "replace": lambda old, new, s: _str(s).replace(_str(old), _str(new)),
    "quote": lambda *a: " ".join(go_quote(_str(x)) for x in a if x is not None),
    "squote": lambda *a: " ".join(f"'{_str(x)}'" for x in a if x is not None),
    "cat": lambda *a: " ".join(_str(x) for x in a if x is not None),
    "splitList": lambda sep, s: _str(s).split(_str(sep)) if sep else list(_str(s)),
    "join": lambda sep, v: _str(sep).join(_str(x) for x in (v if isinstance(v, list | tuple) else [v])),
    "toString": _str,
    "toStrings": lambda v: [_str(x) for x in _as_list(v, "toStrings")],
    "b64enc": lambda s: base64.b64encode(_str(s).encode()).decode(),
    "b64dec": lambda s: _b64dec(_str(s)),
    "sha256sum": lambda s: hashlib.sha256(_str(s).encode()).hexdigest(),
    "toJson": _to_json,
    # Sprig: numbers
    "atoi": _atoi,
    "int": _to_int,
    "int64": _to_int,
    "float64": _to_float,
    "add": lambda *a: int64(sum(_to_int(x) for x in a)),
    "add1": lambda a: int64(_to_int(a) + 1),
    "sub": lambda a, b: int64(_to_int(a) - _to_int(b)),
    "mul": lambda a, *r: _mul(_to_int(a), *(_to_int(x) for x in r)),
    "div": _div,
    "mod": _mod,
    "max": _max,
    "min": _min,
    # Sprig: defaults and logic
    "default": _default,
    "empty": _empty,
    "coalesce": lambda *a: next((x for x in a if truth(x)), None),
    "ternary": lambda vt, vf, cond: vt if truth(cond) else vf,
    # Sprig: lists and dicts
    "list": lambda *a: list(a),
    "first": _first,
    "last": _last,
    "rest": _rest,
    "initial": _initial,
    "append": lambda lst, v: [*_as_list(lst, "append"), v],
    "push": lambda lst, v: [*_as_list(lst, "push"), v],
    "prepend": lambda lst, v: [v, *_as_list(lst, "prepend")],
    "concat": lambda *ls: [x for lst in ls for x in _as_list(lst, "concat")],
    "reverse": lambda v: list(reversed(_as_list(v, "reverse"))),
    "uniq": _uniq,
    "compact": lambda v: [x for x in _as_list(v, "compact") if truth(x)],
    "has": lambda needle, v: needle in (v if isinstance(v, list | tuple) else []),
    "sortAlpha": _sort_alpha,
    "dict": _dict,
    "get": lambda d, k: d.get(_str(k), "") if isinstance(d, Mapping) else "",
    "hasKey": lambda d, k: isinstance(d, Mapping) and _str(k) in d,
    "keys": _keys,
    # Sprig: regular expressions
    "regexMatch": lambda r, s: re.search(_str(r), _str(s)) is not None,
    "regexFind": lambda r, s: m.group() if (m := re.search(_str(r), _str(s))) else "",
    "regexFindAll": lambda r, s, n: _regex_find_all(_str(r), _str(s), n),
    "regexReplaceAll": lambda r, s, repl: re.sub(_str(r), _go_repl(_str(repl)), _str(s)),
    "regexReplaceAllLiteral": lambda r, s, repl: re.sub(_str(r), lambda _m: _str(repl), _str(s)),
    "regexSplit": lambda r, s, n: _regex_split(_str(r), _str(s), n),
}
