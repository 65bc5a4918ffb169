"""Lexing and parsing of rule templates (Go's text/template syntax) into the tree of
``templatetree``. Errors are TemplateError with upstream's wording where it has one."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nfd.rules.govalues import TemplateError
from nfd.rules.templatetree import (
    Action,
    Control,
    Dot,
    Field,
    Func,
    Jump,
    Literal,
    Node,
    Operand,
    Pipe,
    Sub,
    Text,
    Var,
)

__all__ = ["parse"]


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<decl>:=)
  | (?P<punct>[()|,=])
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<char>'(?:[^'\\]|\\.)')
  | (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?))
  | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+)
  | (?P<dot>\.)
  | (?P<var>\$[A-Za-z0-9_]*)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)
_FIELDS_AFTER = re.compile(r"(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    # Fields written directly after this token with no space (``$x.a``, ``(...).a``).
    fields: tuple[str, ...] = ()


def _lex_action(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m:
            raise TemplateError(f"unexpected {src[pos]!r} in action {src.strip()!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        text = m.group()
        if kind == "ws":
            continue
        if kind == "num" and toks and toks[-1].kind in ("field", "var", "dot") and text[0] in "+-":
            raise TemplateError(f"unexpected {text!r} in action")
        fields: tuple[str, ...] = ()
        if kind in ("var",) or (kind == "punct" and text == ")"):
            fm = _FIELDS_AFTER.match(src, pos)
            if fm:
                fields = tuple(fm.group()[1:].split("."))
                pos = fm.end()
        toks.append(_Tok(kind, text, fields))
    return toks


class _Parser:
    def __init__(self, toks: list[_Tok], funcs: Mapping[str, Any]) -> None:
        self.toks = toks
        self.i = 0
        self.funcs = funcs

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self) -> _Tok:
        t = self.peek()
        if t is None:
            raise TemplateError("unexpected end of action")
        self.i += 1
        return t

    def pipeline(self, *, allow_decl: bool = True, range_decl: bool = False) -> Pipe:
        decl: list[str] = []
        assign = False
        if allow_decl:
            # $x := / $x = / (range only) $i, $e :=
            j = self.i
            names: list[str] = []
            while j < len(self.toks) and self.toks[j].kind == "var" and not self.toks[j].fields:
                names.append(self.toks[j].text)
                j += 1
                if j < len(self.toks) and self.toks[j].text == "," and range_decl and len(names) == 1:
                    j += 1
                    continue
                break
            if (names and j < len(self.toks) and self.toks[j].kind in ("decl",)) or (
                names and j < len(self.toks) and self.toks[j].text == "=" and len(names) == 1
            ):
                assign = self.toks[j].text == "="
                decl = names
                self.i = j + 1
        cmds: list[tuple[Operand, ...]] = []
        while True:
            cmd = self.command()
            if not cmd:
                raise TemplateError("missing command in pipeline")
            cmds.append(cmd)
            t = self.peek()
            if t is not None and t.text == "|":
                self.i += 1
                continue
            break
        return Pipe(tuple(decl), assign, tuple(cmds))

    def command(self) -> tuple[Operand, ...]:
        ops: list[Operand] = []
        while True:
            t = self.peek()
            if t is None or t.text in ("|", ")"):
                break
            ops.append(self.operand())
        return tuple(ops)

    def operand(self) -> Operand:
        t = self.next()
        k = t.kind
        if k == "str":
            return Literal(_go_unquote(t.text[1:-1]))
        if k == "raw":
            return Literal(t.text[1:-1])
        if k == "char":
            return Literal(ord(_go_unquote(t.text[1:-1])))
        if k == "num":
            return Literal(_parse_number(t.text))
        if k == "field":
            return Field(tuple(t.text[1:].split(".")))
        if k == "dot":
            return Dot()
        if k == "var":
            return Var(t.text, t.fields)
        if k == "ident":
            if t.text in ("true", "false"):
                return Literal(t.text == "true")
            if t.text == "nil":
                return Literal(None)
            if t.text in _KEYWORDS:
                raise TemplateError(f"unexpected keyword {t.text!r} in command")
            if t.text not in self.funcs:
                raise TemplateError(f'function "{t.text}" not defined')
            return Func(t.text)
        if t.text == "(":
            inner = self.pipeline(allow_decl=False)
            close = self.next()
            if close.text != ")":
                raise TemplateError("unclosed left paren")
            return Sub(inner, close.fields)
        raise TemplateError(f"unexpected {t.text!r} in command")


_KEYWORDS = frozenset(
    {"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"}
)
_ACTION = re.compile(r"\{\{(- )?(.*?)( -)?\}\}", re.DOTALL)
_COMMENT = re.compile(r"^\s*/\*.*\*/\s*$", re.DOTALL)


def parse(src: str, funcs: Mapping[str, Any]) -> list[Node]:
    # Split into text and actions, applying trim markers.
    pieces: list[tuple[str, str]] = []  # ("text", s) | ("action", s)
    pos = 0
    for m in _ACTION.finditer(src):
        text = src[pos : m.start()]
        if m.group(1):
            text = text.rstrip(" \t\r\n")
        pieces.append(("text", text))
        pieces.append(("action", m.group(2)))
        pos = m.end()
        if m.group(3):
            rest = src[pos:]
            pos += len(rest) - len(rest.lstrip(" \t\r\n"))
    tail = src[pos:]
    if "{{" in tail:
        raise TemplateError("unclosed action")
    pieces.append(("text", tail))

    root: list[Node] = []
    stack: list[tuple[Control, list[Node], bool]] = []  # (node, outer list, is_else_if)
    cur = root
    loop_depth = 0

    def close_chain() -> None:
        # "else if" opens a nested control that ends with the same {{end}}.
        nonlocal cur, loop_depth
        while True:
            node, outer, chained = stack.pop()
            if node.kind == "range":
                loop_depth -= 1
            cur = outer
            if not chained:
                return

    for kind, s in pieces:
        if kind == "text":
            if s:
                cur.append(Text(s))
            continue
        if _COMMENT.match(s):
            continue
        toks = _lex_action(s)
        if not toks:
            raise TemplateError("missing value for command")
        head = toks[0].text if toks[0].kind == "ident" else ""
        p = _Parser(toks, funcs)
        if head in ("if", "with", "range"):
            p.i = 1
            pipe = p.pipeline(range_decl=head == "range")
            if p.peek() is not None:
                raise TemplateError(f"unexpected {p.peek().text!r} in {head}")  # type: ignore[union-attr]
            node = Control(head, pipe, [])
            cur.append(node)
            stack.append((node, cur, False))
            if head == "range":
                loop_depth += 1
            cur = node.body
        elif head == "else":
            if not stack:
                raise TemplateError("unexpected {{else}}")
            node = stack[-1][0]
            if node.else_body is not None:
                raise TemplateError("expected end; found {{else}}")
            node.else_body = []
            cur = node.else_body
            if len(toks) > 1:
                sub = toks[1].text
                if sub not in ("if", "with") or node.kind == "range":
                    raise TemplateError(f"unexpected {sub!r} after else")
                p.i = 2
                pipe = p.pipeline()
                inner = Control(sub, pipe, [])
                cur.append(inner)
                stack.append((inner, cur, True))
                cur = inner.body
        elif head == "end":
            if len(toks) > 1:
                raise TemplateError("unexpected tokens after end")
            if not stack:
                raise TemplateError("unexpected {{end}}")
            close_chain()
        elif head in ("break", "continue"):
            if len(toks) > 1:
                raise TemplateError(f"unexpected tokens after {head}")
            if loop_depth == 0:
                raise TemplateError(f"{{{{{head}}}}} outside {{{{range}}}}")
            cur.append(Jump(head))
        elif head in ("define", "template", "block"):
            raise TemplateError(f"{{{{{head}}}}} is not supported in rule templates")
        else:
            pipe = p.pipeline()
            if p.peek() is not None:
                raise TemplateError(f"unexpected {p.peek().text!r} in operand")  # type: ignore[union-attr]
            cur.append(Action(pipe))
    if stack:
        raise TemplateError(f"unexpected EOF: {{{{{stack[-1][0].kind}}}}} has no {{{{end}}}}")
    return root


def _go_unquote(s: str) -> str:
    out: list[str] = []
    i = 0
    simple = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b"}
    simple |= {"f": "\f", "v": "\v"}
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        n = s[i + 1] if i + 1 < len(s) else ""
        if n in simple:
            out.append(simple[n])
            i += 2
        elif n in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[n]
            digits = s[i + 2 : i + 2 + width]
            try:
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise TemplateError(f"invalid escape in string {s!r}") from None
            i += 2 + width
        else:
            raise TemplateError(f"invalid escape \\{n} in string {s!r}")
    return "".join(out)


def _parse_number(text: str) -> int | float:
    t = text.lower()
    try:
        if t.lstrip("+-").startswith("0x"):
            return int(t, 16)
        if any(c in t for c in ".e"):
            return float(t)
        return int(t, 10)
    except ValueError:
        raise TemplateError(f"bad number syntax: {text!r}") from None
