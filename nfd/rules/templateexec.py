"""Execution of a parsed rule template: pipelines, control structures, variables and
function calls, with ``missingkey=error`` as upstream executes them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nfd.rules import templatetree as tree
from nfd.rules.govalues import MAX_ITERATIONS, MAX_VALUE, TemplateError, go_str, go_type, truth

__all__ = ["Executor", "Scope"]


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class Scope:
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


class Executor:
    def __init__(self, funcs: Mapping[str, Callable[..., Any]]) -> None:
        self.funcs = funcs
        self.out: list[str] = []
        self.size = 0  # characters in out
        self.iterations = 0

    def run(self, nodes: Sequence[tree.Node], dot: Any, scope: Scope) -> None:
        out = self.out
        for n in nodes:
            if isinstance(n, tree.Text):
                text = n.text
            elif isinstance(n, tree.Action):
                field = n.field
                if field is not None:
                    # The common {{ .Name }}: a field of a string map, printed.
                    v = dot
                    for f in field:
                        v = v[f] if type(v) is dict and f in v else _field(v, f)
                    text = v if type(v) is str else "<no value>" if v is None else go_str(v)
                else:
                    v = self.pipe(n.pipe, dot, scope)
                    if n.pipe.decl:
                        continue
                    text = "<no value>" if v is None else go_str(v)
            elif isinstance(n, tree.Control):
                self.control(n, dot, scope)
                continue
            else:
                raise _Break() if n.kind == "break" else _Continue()
            out.append(text)
            self.size += len(text)
            if self.size > MAX_VALUE:
                raise TemplateError(f"the output is longer than the limit of {MAX_VALUE} characters")

    def control(self, n: tree.Control, dot: Any, scope: Scope) -> None:
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

    def range(self, n: tree.Control, v: Any, scope: Scope) -> None:
        items: Iterable[tuple[Any, Any]]
        if v is None:
            items = ()
        elif isinstance(v, bool | str | float):
            raise TemplateError(f"range can't iterate over {go_str(v)}")
        elif isinstance(v, int):
            items = ((i, i) for i in range(v))  # one at a time: ``range 1000000`` makes no list
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
            self.iterations += 1
            if self.iterations > MAX_ITERATIONS:
                raise TemplateError(f"range: more than {MAX_ITERATIONS} iterations")
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

    def pipe(self, p: tree.Pipe, dot: Any, scope: Scope, *, declare: bool = True) -> Any:
        value: Any = _NOTHING
        for cmd in p.cmds:
            value = self.command(cmd, dot, scope, value)
        if p.decl and declare:
            if p.assign:
                scope.set(p.decl[0], value)
            else:
                scope.vars.append((p.decl[0], value))
        return value

    def command(self, cmd: tuple[tree.Operand, ...], dot: Any, scope: Scope, piped: Any) -> Any:
        first = cmd[0]
        if isinstance(first, tree.Func):
            name = first.name
            if name in ("and", "or"):
                return self.and_or(name, cmd[1:], dot, scope, piped)
            args = [self.operand(o, dot, scope) for o in cmd[1:]]
            if piped is not _NOTHING:
                args.append(piped)
            try:
                result = self.funcs[name](*args)
            except TemplateError as e:
                raise TemplateError(f"error calling {name}: {e}") from None
            except TypeError as e:
                if "positional argument" in str(e):
                    raise TemplateError(f"wrong number of args for {name}: got {len(args)}") from None
                raise TemplateError(f"error calling {name}: wrong type of argument ({e})") from None
            except (ValueError, IndexError, KeyError, ZeroDivisionError, OverflowError, re.error) as e:
                raise TemplateError(f"error calling {name}: {e}") from None
            if isinstance(result, str | list | Mapping) and len(result) > MAX_VALUE:
                raise TemplateError(f"error calling {name}: a result longer than the limit of {MAX_VALUE}")
            return result
        if len(cmd) > 1 or piped is not _NOTHING:
            if isinstance(first, tree.Literal) and first.value is None:
                raise TemplateError("nil is not a command")
            raise TemplateError(f"can't give argument to non-function {_describe(first)}")
        if isinstance(first, tree.Literal) and first.value is None:
            raise TemplateError("nil is not a command")
        return self.operand(first, dot, scope)

    def and_or(self, name: str, ops: Sequence[tree.Operand], dot: Any, scope: Scope, piped: Any) -> Any:
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

    def operand(self, o: tree.Operand, dot: Any, scope: Scope) -> Any:
        if isinstance(o, tree.Literal):
            return o.value
        if isinstance(o, tree.Dot):
            return dot
        if isinstance(o, tree.Field):
            v = dot
            for f in o.chain:
                v = _field(v, f)
            return v
        if isinstance(o, tree.Var):
            v = scope.get(o.name)
            for f in o.chain:
                v = _field(v, f)
            return v
        if isinstance(o, tree.Sub):
            v = self.pipe(o.pipe, dot, scope)
            for f in o.chain:
                v = _field(v, f)
            return v
        # A function name as an argument is a call with no arguments.
        return self.command((o,), dot, scope, _NOTHING)


_NOTHING: Any = object()


def _describe(o: tree.Operand) -> str:
    if isinstance(o, tree.Field):
        return "." + ".".join(o.chain)
    if isinstance(o, tree.Var):
        return o.name
    if isinstance(o, tree.Literal):
        return go_str(o.value)
    return "."
