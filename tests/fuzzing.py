"""Shared pieces of the property tests of bad input: documents of the right shape with
wrong leaves, YAML-ish text and raw bytes, and the check that an error is one line
naming the file and the key.

The hypothesis profile (``tests/conftest.py``) is derandomized and has no example
database, so every run tries the same examples.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

import yaml
from hypothesis import strategies as st

# Strings that mean something to one loader or another: durations, regular expressions
# that do not compile or compile to something huge, template delimiters, control and
# non-ASCII characters.
SPECIAL_STRINGS = (
    "", " ", "\t", "\x00", "\x85", "\u2028", "\ufeff", "é", "😀", "-", "~", "null", "NaN",
    "60s", "0", "-1s", "1ns", "1e999", "99999999999h", "1h30m", "([", "a{99999999999}",
    "(" * 200, "{{", "}}", "@", "@cpu.model.family", "/", "a/b", "..", "*", "%d",
    "x" * 300,
)  # fmt: skip

scalars: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -0.0]),
    st.text(max_size=12),
    st.sampled_from(SPECIAL_STRINGS),
)

# Mapping keys as YAML has them: mostly strings, some numbers, booleans and nulls.
keys: st.SearchStrategy[Any] = st.one_of(
    st.text(max_size=6), st.text(max_size=6), st.integers(-3, 3), st.booleans(), st.none()
)

junk: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(keys, inner, max_size=3),
    ),
    max_leaves=6,
)


def deeply_nested(depth: int) -> str:
    """YAML flow text of lists and mappings ``depth`` deep."""
    return "[{k: " * (depth // 2) + "x" + "}]" * (depth // 2)


def mutated(doc: Any) -> st.SearchStrategy[Any]:
    """``doc`` with some of its values replaced by junk, left out, or given extra keys;
    lists may be shorter, longer or empty. Most draws keep most of the shape."""
    if isinstance(doc, Mapping):
        names = list(doc)
        shaped = st.fixed_dictionaries(
            {k: mutated(doc[k]) for k in names},
        ).flatmap(
            lambda d: st.tuples(
                st.sets(st.sampled_from(names), max_size=1) if names else st.just(set()),
                st.dictionaries(keys, junk, max_size=1),
            ).map(lambda t: {**{k: v for k, v in d.items() if k not in t[0]}, **t[1]})
        )
        return st.one_of(shaped, shaped, shaped, junk)
    if isinstance(doc, list):
        if not doc:
            return st.one_of(st.just([]), st.lists(junk, max_size=2), junk)
        shaped_list = st.lists(st.one_of(*(mutated(x) for x in doc)), max_size=len(doc) + 1)
        return st.one_of(shaped_list, shaped_list, junk)
    return st.one_of(st.just(doc), st.just(doc), scalars)


# YAML pieces put together at random: most sequences are not YAML, some are, and some
# are YAML whose values the loader cannot build (a 13th month, a 5,000-digit number).
YAML_TOKENS = (
    "a", "b", ": ", ":", "- ", "-", "\n", "  ", "[", "]", "{", "}", ",", "&x ", "*x", "!!int ",
    "!!str ", "!!binary ", "!!set ", "!!timestamp ", "!!python/object:os.system ", "? ", "'", '"',
    "\\", "#", "%YAML 1.1\n", "---\n", "...\n", "<<: ", "\t", "\ufeff", "\x85", "|\n", ">\n",
    "2001-13-45", "2001-02-30 10:00:00", "2001-12-14t21:59:43.10-05:00", "1" * 5000,
    "0x" + "f" * 5000, "0b" + "1" * 20000, "1" + ":59" * 50, ".nan", ".inf", "-.inf", "~",
    "null", "true", "0o17", "1e3", "1_000", "=", "é", "\x00", "\x07",
)  # fmt: skip

yaml_soup = st.lists(st.sampled_from(YAML_TOKENS), max_size=20).map("".join)

raw_bytes = st.one_of(
    st.binary(max_size=200),
    yaml_soup.map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.text(max_size=200).map(lambda s: s.encode()),
)


def dump(doc: Any) -> str:
    """YAML text of a generated document (every value YAML can write)."""
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


def one_line_naming(message: str, name: str) -> None:
    """An error as a user sees it: one line that names the file once."""
    assert "\n" not in message and "\r" not in message, message
    assert message.count(name) == 1, message
    assert "Traceback" not in message and "internal error" not in message, message


# One part of a key path: a list index, a quoted key (as Python writes a string), a name.
_PART = re.compile(r"""\[(\d+)\]|\.?('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^.\[\]:'"\s]+)""")


def named_key(message: str, data: Any) -> str | None:
    """The key path (``core.sleepInterval``, ``resources[0].pci``, ``resources[0].'a.b'``)
    that starts ``message``, checked against ``data``: every part but the last is there
    (the last may be a required key that is missing), down to a value that is no
    container (a loader may read a string as a mapping's shorthand). None when the
    message names no key."""
    parts: list[int | str] = []
    pos = 0
    while (m := _PART.match(message, pos)) is not None:
        lead = message[pos]
        if (pos == 0 and lead == ".") or (pos > 0 and lead not in ".["):
            break
        parts.append(int(m.group(1)) if m.group(1) else _unquote(m.group(2)))
        pos = m.end()
    if not parts or not message[pos:].startswith(": "):
        return None
    node = data
    for n, part in enumerate(parts):
        if not isinstance(node, Mapping | list):
            break
        if isinstance(part, int) and isinstance(node, list):
            assert part < len(node), (message, data)
            node = node[part]
        else:
            assert isinstance(node, Mapping), (message, data)
            found = [k for k in node if str(k) == str(part)]
            assert found or n == len(parts) - 1, (message, data)
            node = node[found[0]] if found else None
    return message[:pos]


def _unquote(part: str) -> str:
    return ast.literal_eval(part) if part[:1] in "'\"" else part
