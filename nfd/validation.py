"""One line from a pydantic ``ValidationError``, for whatever nfd validates with pydantic
(the device config, the master's settings): the error at its key path, as
``resources[1].pci.vendor: reason``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails

Loc = Sequence[int | str]

# pydantic's wording where a reader of a YAML file or of the environment would not
# recognise it ("a valid tuple", "instance of ResourceConfig").
_PLAIN = {
    "missing": "required",
    "extra_forbidden": "unknown key",
    "unexpected_keyword_argument": "unknown key",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "dataclass_type": "expected a mapping",
    "tuple_type": "expected a list",
    "list_type": "expected a list",
}


class NestedError(ValueError):
    """Raised by a validator about a key below the value it validates: ``key`` is the
    path from there (``pci.vendor``; ``resources[1].name`` from the top)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def key_path(loc: Loc) -> str:
    """``("resources", 1, "name")`` -> ``resources[1].name``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{key_name(part)}" if out else key_name(part)
    return out


def key_name(key: object) -> str:
    """A key in a key path: as it is when a plain name, quoted otherwise (an empty key,
    blanks, a dot that would read as a path, a newline that would break the line)."""
    text = str(key)
    plain = text != "" and all(c.isalnum() or c in "_-/" for c in text)
    return text if plain or not isinstance(key, str) else repr(key)


def issue(err: ErrorDetails, name: Callable[[Loc], str] = key_path) -> str:
    """One error: its key (``name`` spells the location) and why."""
    cause = err.get("ctx", {}).get("error")
    loc = err["loc"]
    if err["type"] == "invalid_key" and loc:  # YAML's 1: or null: where a name belongs
        where = name(loc[:-1])
        why = f"the key {loc[-1]!r} is not a string"
        return f"{where}: {why}" if where else why
    where = name(loc)
    if isinstance(cause, NestedError):
        where = f"{where}.{cause.key}" if where else cause.key
    why = str(cause) if isinstance(cause, Exception) else _PLAIN.get(err["type"], err["msg"])
    return f"{where}: {why}" if where else why


def error_line(e: ValidationError, name: Callable[[Loc], str] = key_path, *, every: bool = False) -> str:
    """The first error (``every``: all of them, joined with ``;``), on one line."""
    errors = e.errors(include_url=False)
    return "; ".join(" ".join(issue(err, name).split()) for err in (errors if every else errors[:1]))
