"""The parse tree of a rule template: what ``templateparse`` builds and ``templateexec``
runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Literal:
    value: Any


@dataclass(frozen=True)
class Field:
    chain: tuple[str, ...]


@dataclass(frozen=True)
class Var:
    name: str
    chain: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dot:
    pass


@dataclass(frozen=True)
class Func:
    name: str


@dataclass(frozen=True)
class Sub:
    pipe: Pipe
    chain: tuple[str, ...] = ()


Operand = Literal | Field | Var | Dot | Func | Sub


@dataclass(frozen=True)
class Pipe:
    decl: tuple[str, ...]
    assign: bool  # "=" rather than ":="
    cmds: tuple[tuple[Operand, ...], ...]


@dataclass
class Text:
    text: str


@dataclass
class Action:
    pipe: Pipe
    # The field chain when the action is just ``{{ .a.b }}`` (a fast path), else None.
    field: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        p = self.pipe
        if not p.decl and len(p.cmds) == 1 and len(p.cmds[0]) == 1 and isinstance(p.cmds[0][0], Field):
            self.field = p.cmds[0][0].chain


@dataclass
class Control:
    kind: str  # if, range, with
    pipe: Pipe
    body: list[Node]
    else_body: list[Node] | None = None


@dataclass
class Jump:
    kind: str  # break, continue


Node = Text | Action | Control | Jump
