"""An interpreter for the subset of Go's text/template (with Sprig functions) that rule
templates use: ``labelsTemplate`` and ``varsTemplate``.

Supported: text and actions with ``{{-``/``-}}`` trimming and ``{{/* comments */}}``;
pipelines with ``|``; fields (``.a.b``), ``$`` and variables (``$x := ...``,
``$x = ...``); parenthesised pipelines with fields after them (``(index .l 0).x``);
string, raw-string, number, ``true``/``false``/``nil`` literals; ``if``/``else if``/
``else``, ``range`` (lists, maps in key order, integers; ``$i, $e :=``; ``else``;
``break``/``continue``), ``with``/``else``; the built-in functions and the Sprig
functions listed in ``FUNCTIONS``. Execution runs with ``missingkey=error`` as
upstream's does: a field that a map does not hold is an error.

Anything else (``define``, ``template``, ``block``, an unknown function such as Sprig's
removed ``env``) is a TemplateError with a message, raised when the template is first
executed, as upstream reports a template that does not parse when its rule matches.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class TemplateError(Exception):
    """The template does not parse, or failed while executing."""


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


# -- values as Go prints and compares them --------------------------------------------


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
        return _go_float(v)
    if isinstance(v, Mapping):
        return "map[" + " ".join(f"{go_str(k)}:{go_str(v[k])}" for k in sorted(v, key=str)) + "]"
    if isinstance(v, list | tuple):
        return "[" + " ".join(go_str(x) for x in v) + "]"
    return str(v)


def _go_float(f: float) -> str:
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


# -- functions ------------------------------------------------------------------------


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


def _format_one(a: Any, flags: str, width: str | None, prec: str | None, verb: str) -> str:
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
            return pad("'" + chr(a) + "'")
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
            return pad(chr(a))
        spec = {"d": "d", "b": "b", "o": "o", "x": "x", "X": "X"}[verb]
        return format(a, f"{pyflags}{w}{spec}")
    if verb in "feEgG":
        if isinstance(a, bool) or not isinstance(a, int | float):
            return bad
        if verb in "gG" and prec is None:
            return pad(_go_float(float(a)))
        return format(float(a), f"{pyflags}{w}{p or '.6' if verb in 'feE' else p}{verb}")
    return f"%!{verb}({go_type(a)}={go_str(a)})"


# Sprig helpers (Go semantics: the piped value is the last argument).


def _to_int(v: Any) -> int:
    # Sprig converts with spf13/cast: numbers and numeric strings; anything else is 0.
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v)
    if isinstance(v, str):
        s = v.strip()
        try:
            if re.fullmatch(r"[+-]?0[xX][0-9a-fA-F]+", s):
                return int(s, 16)
            if re.fullmatch(r"[+-]?\d+", s):
                return int(s, 10)
            return int(float(s))
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


FUNCTIONS: dict[str, Callable[..., Any]] = {
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
    # Sprig: strings
    "trim": lambda s: _str(s).strip(" \t\n\r\v\f\x85\xa0"),
    "trimAll": lambda cut, s: _str(s).strip(_str(cut)),
    "trimPrefix": lambda p, s: _str(s).removeprefix(_str(p)),
    "trimSuffix": lambda p, s: _str(s).removesuffix(_str(p)),
    "upper": lambda s: _str(s).upper(),
    "lower": lambda s: _str(s).lower(),
    "title": _title,
    "repeat": lambda n, s: _str(s) * max(_to_int(n), 0),
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
    "add": lambda *a: sum(_to_int(x) for x in a),
    "add1": lambda a: _to_int(a) + 1,
    "sub": lambda a, b: _to_int(a) - _to_int(b),
    "mul": lambda a, *r: math.prod([_to_int(a), *(_to_int(x) for x in r)]),
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
