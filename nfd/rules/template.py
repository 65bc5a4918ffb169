"""An interpreter for the subset of Go's text/template (with Sprig functions) that rule
templates use: ``labelsTemplate`` and ``varsTemplate``.

Supported: text and actions with ``{{-``/``-}}`` trimming and ``{{/* comments */}}``;
pipelines with ``|``; fields (``.a.b``), ``$`` and variables (``$x := ...``,
``$x = ...``); parenthesised pipelines with fields after them (``(index .l 0).x``);
string, raw-string, number, ``true``/``false``/``nil`` literals; ``if``/``else if``/
``else``, ``range`` (lists, maps in key order, integers; ``$i, $e :=``; ``else``;
``break``/``continue``), ``with``/``else``; the built-in functions and the Sprig
functions in ``nfd.rules.templatefuncs.FUNCTIONS``. Execution runs with ``missingkey=error`` as
upstream's does: a field that a map does not hold is an error.

Anything else (``define``, ``template``, ``block``, an unknown function such as Sprig's
removed ``env``) is a TemplateError with a message, raised when the template is first
executed, as upstream reports a template that does not parse when its rule matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nfd.rules.govalues import TemplateError, go_str, go_type, truth
from nfd.rules.templatefuncs import FUNCTIONS

__all__ = ["FUNCTIONS", "Template", "TemplateError"]


# -- lexing ---------------------------------------------------------------------------

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


# -- the parse tree -------------------------------------------------------------------


@dataclass(frozen=True)
class _Literal:
    value: Any


@dataclass(frozen=True)
class _Field:
    chain: tuple[str, ...]


@dataclass(frozen=True)
class _Var:
    name: str
    chain: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Dot:
    pass


@dataclass(frozen=True)
class _Func:
    name: str


@dataclass(frozen=True)
class _Sub:
    pipe: _Pipe
    chain: tuple[str, ...] = ()


_Operand = _Literal | _Field | _Var | _Dot | _Func | _Sub


@dataclass(frozen=True)
class _Pipe:
    decl: tuple[str, ...]
    assign: bool  # "=" rather than ":="
    cmds: tuple[tuple[_Operand, ...], ...]


@dataclass
class _Text:
    text: str


@dataclass
class _Action:
    pipe: _Pipe
    # The field chain when the action is just ``{{ .a.b }}`` (a fast path), else None.
    field: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        p = self.pipe
        if not p.decl and len(p.cmds) == 1 and len(p.cmds[0]) == 1 and isinstance(p.cmds[0][0], _Field):
            self.field = p.cmds[0][0].chain


@dataclass
class _Control:
    kind: str  # if, range, with
    pipe: _Pipe
    body: list[_Node]
    else_body: list[_Node] | None = None


@dataclass
class _Jump:
    kind: str  # break, continue


_Node = _Text | _Action | _Control | _Jump


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

    def pipeline(self, *, allow_decl: bool = True, range_decl: bool = False) -> _Pipe:
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
        cmds: list[tuple[_Operand, ...]] = []
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
        return _Pipe(tuple(decl), assign, tuple(cmds))

    def command(self) -> tuple[_Operand, ...]:
        ops: list[_Operand] = []
        while True:
            t = self.peek()
            if t is None or t.text in ("|", ")"):
                break
            ops.append(self.operand())
        return tuple(ops)

    def operand(self) -> _Operand:
        t = self.next()
        k = t.kind
        if k == "str":
            return _Literal(_go_unquote(t.text[1:-1]))
        if k == "raw":
            return _Literal(t.text[1:-1])
        if k == "char":
            return _Literal(ord(_go_unquote(t.text[1:-1])))
        if k == "num":
            return _Literal(_parse_number(t.text))
        if k == "field":
            return _Field(tuple(t.text[1:].split(".")))
        if k == "dot":
            return _Dot()
        if k == "var":
            return _Var(t.text, t.fields)
        if k == "ident":
            if t.text in ("true", "false"):
                return _Literal(t.text == "true")
            if t.text == "nil":
                return _Literal(None)
            if t.text in _KEYWORDS:
                raise TemplateError(f"unexpected keyword {t.text!r} in command")
            if t.text not in self.funcs:
                raise TemplateError(f'function "{t.text}" not defined')
            return _Func(t.text)
        if t.text == "(":
            inner = self.pipeline(allow_decl=False)
            close = self.next()
            if close.text != ")":
                raise TemplateError("unclosed left paren")
            return _Sub(inner, close.fields)
        raise TemplateError(f"unexpected {t.text!r} in command")


_KEYWORDS = frozenset(
    {"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"}
)
_ACTION = re.compile(r"\{\{(- )?(.*?)( -)?\}\}", re.DOTALL)
_COMMENT = re.compile(r"^\s*/\*.*\*/\s*$", re.DOTALL)


def _parse(src: str, funcs: Mapping[str, Any]) -> list[_Node]:
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

    root: list[_Node] = []
    stack: list[tuple[_Control, list[_Node], bool]] = []  # (node, outer list, is_else_if)
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
                cur.append(_Text(s))
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
            node = _Control(head, pipe, [])
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
                inner = _Control(sub, pipe, [])
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
            cur.append(_Jump(head))
        elif head in ("define", "template", "block"):
            raise TemplateError(f"{{{{{head}}}}} is not supported in rule templates")
        else:
            pipe = p.pipeline()
            if p.peek() is not None:
                raise TemplateError(f"unexpected {p.peek().text!r} in operand")  # type: ignore[union-attr]
            cur.append(_Action(pipe))
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


# -- execution ------------------------------------------------------------------------


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Scope:
    def __init__(self, root: Any) -> None:
        self.vars: list[tuple[str, Any]] = [("$", root)]

    def get(self, name: str) -> Any:
        for n, v in reversed(self.vars):
            if n == name:
                return v
        raise TemplateError(f"undefined variable: {name}")

    def set(self, name: str, value: Any) -> None:
        for i in range(len(self.vars) - 1, -1, -1):
            if self.vars[i][0] == name:
                self.vars[i] = (name, value)
                return
        raise TemplateError(f"undefined variable: {name}")


def _field(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        if name in value:
            return value[name]
        raise TemplateError(f'map has no entry for key "{name}"')
    if value is None:
        raise TemplateError(f"nil pointer evaluating interface {{}}.{name}")
    raise TemplateError(f"can't evaluate field {name} in type {go_type(value)}")


class _Exec:
    def __init__(self, funcs: Mapping[str, Callable[..., Any]]) -> None:
        self.funcs = funcs
        self.out: list[str] = []

    def run(self, nodes: Sequence[_Node], dot: Any, scope: _Scope) -> None:
        out = self.out
        for n in nodes:
            if isinstance(n, _Text):
                out.append(n.text)
            elif isinstance(n, _Action):
                field = n.field
                if field is not None:
                    # The common {{ .Name }}: a field of a string map, printed.
                    v = dot
                    for f in field:
                        v = v[f] if type(v) is dict and f in v else _field(v, f)
                    out.append(v if type(v) is str else "<no value>" if v is None else go_str(v))
                    continue
                v = self.pipe(n.pipe, dot, scope)
                if not n.pipe.decl:
                    out.append("<no value>" if v is None else go_str(v))
            elif isinstance(n, _Control):
                self.control(n, dot, scope)
            else:
                raise _Break() if n.kind == "break" else _Continue()

    def control(self, n: _Control, dot: Any, scope: _Scope) -> None:
        mark = len(scope.vars)
        try:
            v = self.pipe(n.pipe, dot, scope, declare=n.kind != "range")
            if n.kind == "if":
                if truth(v):
                    self.run(n.body, dot, scope)
                elif n.else_body is not None:
                    self.run(n.else_body, dot, scope)
            elif n.kind == "with":
                if truth(v):
                    self.run(n.body, v, scope)
                elif n.else_body is not None:
                    self.run(n.else_body, dot, scope)
            else:
                self.range(n, v, scope)
        finally:
            del scope.vars[mark:]

    def range(self, n: _Control, v: Any, scope: _Scope) -> None:
        items: list[tuple[Any, Any]]
        if v is None:
            items = []
        elif isinstance(v, bool | str | float):
            raise TemplateError(f"range can't iterate over {go_str(v)}")
        elif isinstance(v, int):
            items = [(i, i) for i in range(v)]
        elif isinstance(v, Mapping):
            items = [(k, v[k]) for k in sorted(v, key=str)]
        elif isinstance(v, list | tuple):
            items = list(enumerate(v))
        else:
            raise TemplateError(f"range can't iterate over {go_str(v)}")
        if not items:
            if n.else_body is not None:
                self.run(n.else_body, v, scope)
            return
        decl = n.pipe.decl
        mark = len(scope.vars)
        for key, elem in items:
            del scope.vars[mark:]
            if len(decl) == 1:
                scope.vars.append((decl[0], key if isinstance(v, int) and not isinstance(v, bool) else elem))
            elif len(decl) == 2:
                scope.vars.append((decl[0], key))
                scope.vars.append((decl[1], elem))
            try:
                self.run(n.body, elem, scope)
            except _Break:
                break
            except _Continue:
                continue

    def pipe(self, p: _Pipe, dot: Any, scope: _Scope, *, declare: bool = True) -> Any:
        value: Any = _NOTHING
        for cmd in p.cmds:
            value = self.command(cmd, dot, scope, value)
        if p.decl and declare:
            if p.assign:
                scope.set(p.decl[0], value)
            else:
                scope.vars.append((p.decl[0], value))
        return value

    def command(self, cmd: tuple[_Operand, ...], dot: Any, scope: _Scope, piped: Any) -> Any:
        first = cmd[0]
        if isinstance(first, _Func):
            name = first.name
            if name in ("and", "or"):
                return self.and_or(name, cmd[1:], dot, scope, piped)
            args = [self.operand(o, dot, scope) for o in cmd[1:]]
            if piped is not _NOTHING:
                args.append(piped)
            try:
                return self.funcs[name](*args)
            except TemplateError as e:
                raise TemplateError(f"error calling {name}: {e}") from None
            except TypeError as e:
                if "positional argument" in str(e):
                    raise TemplateError(f"wrong number of args for {name}: got {len(args)}") from None
                raise TemplateError(f"error calling {name}: wrong type of argument ({e})") from None
            except (ValueError, IndexError, KeyError, ZeroDivisionError, re.error) as e:
                raise TemplateError(f"error calling {name}: {e}") from None
        if len(cmd) > 1 or piped is not _NOTHING:
            if isinstance(first, _Literal) and first.value is None:
                raise TemplateError("nil is not a command")
            raise TemplateError(f"can't give argument to non-function {_describe(first)}")
        if isinstance(first, _Literal) and first.value is None:
            raise TemplateError("nil is not a command")
        return self.operand(first, dot, scope)

    def and_or(self, name: str, ops: Sequence[_Operand], dot: Any, scope: _Scope, piped: Any) -> Any:
        thunks: list[Callable[[], Any]] = [lambda o=o: self.operand(o, dot, scope) for o in ops]  # type: ignore[misc]
        if piped is not _NOTHING:
            thunks.append(lambda: piped)
        if not thunks:
            raise TemplateError(f"wrong number of args for {name}: want at least 1 got 0")
        v: Any = None
        for t in thunks:
            v = t()
            if truth(v) != (name == "and"):
                return v
        return v

    def operand(self, o: _Operand, dot: Any, scope: _Scope) -> Any:
        if isinstance(o, _Literal):
            return o.value
        if isinstance(o, _Dot):
            return dot
        if isinstance(o, _Field):
            v = dot
            for f in o.chain:
                v = _field(v, f)
            return v
        if isinstance(o, _Var):
            v = scope.get(o.name)
            for f in o.chain:
                v = _field(v, f)
            return v
        if isinstance(o, _Sub):
            v = self.pipe(o.pipe, dot, scope)
            for f in o.chain:
                v = _field(v, f)
            return v
        # A function name as an argument is a call with no arguments.
        return self.command((o,), dot, scope, _NOTHING)


_NOTHING: Any = object()


def _describe(o: _Operand) -> str:
    if isinstance(o, _Field):
        return "." + ".".join(o.chain)
    if isinstance(o, _Var):
        return o.name
    if isinstance(o, _Literal):
        return go_str(o.value)
    return "."


class Template:
    """A parsed template; parse errors are kept and raised by ``render``."""

    __slots__ = ("_error", "_nodes", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._nodes: list[_Node] | None = None
        self._error: str | None = None
        try:
            self._nodes = _parse(source, FUNCTIONS)
        except TemplateError as e:
            self._error = str(e)
        except RecursionError:
            self._error = "nested too deeply"

    @property
    def parse_error(self) -> str | None:
        return self._error

    def render(self, data: Any) -> str:
        if self._nodes is None:
            raise TemplateError(f"failed to parse template: {self._error}")
        ex = _Exec(FUNCTIONS)
        scope = _Scope(data)
        try:
            ex.run(self._nodes, data, scope)
        except TemplateError as e:
            raise TemplateError(f"failed to expand template: {e}") from None
        except RecursionError:
            raise TemplateError("failed to expand template: nested too deeply") from None
        return "".join(ex.out)

    def expand_map(self, data: Any) -> dict[str, str]:
        """Upstream's ExpandMap: ``key=value`` lines; blank lines skipped; a line without
        ``=`` is an error."""
        out: dict[str, str] = {}
        for line in self.render(data).split("\n"):
            item = line.strip()
            if not item:
                continue
            key, sep, value = item.partition("=")
            if not sep:
                raise TemplateError(
                    f"missing value in expanded template line {item!r}, (format must be '<key>=<value>')"
                )
            out[key] = value
        return out
