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

The parts: ``templateparse`` (lexer and parser), ``templatetree`` (the parse tree),
``templateexec`` (execution), ``templatefuncs`` (the functions).
"""

from __future__ import annotations

from typing import Any

from nfd.rules.govalues import TemplateError
from nfd.rules.templateexec import Executor, Scope
from nfd.rules.templatefuncs import FUNCTIONS
from nfd.rules.templateparse import parse
from nfd.rules.templatetree import Node

__all__ = ["FUNCTIONS", "Template", "TemplateError"]


class Template:
    """A parsed template; parse errors are kept and raised by ``render``."""

    __slots__ = ("_error", "_nodes", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._nodes: list[Node] | None = None
        self._error: str | None = None
        try:
            self._nodes = parse(source, FUNCTIONS)
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
        ex = Executor(FUNCTIONS)
        scope = Scope(data)
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
