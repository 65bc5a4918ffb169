"""The house as a test: every import in nfd/ against the "may import" table of
docs/architecture.md, read from the doc so that the doc stays the one statement of it,
and every import between the master's own rooms against the doc's table of those; no
cycles between rooms, and between modules or packages only the listed ones; no room
reaching into another's private modules; the node's processes never loading the master; no
module past 400 lines but the listed tables.

Imports are read with ``ast``, so lazy ones (inside functions) and those under
``TYPE_CHECKING`` count as much as the ones at the top.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NFD = REPO / "nfd"
DOC = REPO / "docs" / "architecture.md"

# Imports that break a rule of the doc today, each (importer, imported module) with why it
# is still there. Paying one off means deleting its line: a stale entry fails the test.
KNOWN_DEBT: dict[tuple[str, str], str] = {}

# Import cycles between modules (within a room: the rooms have none), each the exact set
# of modules of one cycle with why it is still there. Paying one off means deleting its
# entry: a cycle that is gone, or that grew, fails the test.
KNOWN_CYCLES: dict[frozenset[str], str] = {}

# Cycles between a package and a package inside it, each with why.
KNOWN_PACKAGE_CYCLES: dict[frozenset[str], str] = {}

# The modules allowed past LONGEST lines, each with why: generated code and tables, whose
# length is their content's, not a sign of several jobs in one file.
LONGEST = 400
LONG_BY_NATURE: dict[str, str] = {
    "nfd/sources/cpuid_names.py": "a table: CPUID's registers and bits, named as upstream names them",
}

# The command modules of the processes that run on every node.
NODE_COMMANDS = ("worker", "deviceplugin", "dra", "topologyupdater", "discover")


@dataclass(frozen=True)
class Import:
    importer: str  # module name, e.g. nfd.worker.loop
    target: str  # the nfd module imported (a submodule when ``from pkg import mod``)
    where: str  # file:line, for the message


@dataclass(frozen=True)
class Row:
    rooms: frozenset[str]  # the rooms of the row's first column
    allowed: frozenset[str]  # rooms (``sources``) or single modules (``sources.memory``)
    every_room: bool  # the command row: it may import any room


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (REPO / rel).with_suffix(".py").is_file() or (REPO / rel / "__init__.py").is_file()


def room_of(module: str) -> str:
    """The room of an nfd module: ``nfd.sources.cpu`` -> ``sources``; ``nfd`` itself -> ``nfd``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "nfd"


@cache
def imports() -> tuple[Import, ...]:
    found: list[Import] = []
    for path in sorted(NFD.rglob("*.py")):
        importer = module_name(path)
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
            for target in targets(node, package):
                if target == "nfd" or target.startswith("nfd."):
                    found.append(Import(importer, target, where))
    return tuple(found)


def targets(node: ast.AST, package: str) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        # ``from nfd.sources import memory`` imports the module nfd.sources.memory;
        # ``from nfd.sources import FeatureSource`` imports nfd.sources.
        subs = [f"{module}.{a.name}" for a in node.names if is_module(f"{module}.{a.name}")]
        if len(subs) < len(node.names):
            yield module
        yield from subs


def table_rows(header: str) -> Iterator[tuple[str, str]]:
    """The first and last cells of each row of the doc's table under ``header``."""
    text = DOC.read_text()
    for line in text[text.index(header) :].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, f"architecture.md: a row of a rooms table without 3 cells: {line[:60]}"
        yield cells[0], cells[-1]


@cache
def table() -> tuple[Row, ...]:
    rows: list[Row] = []
    for first, last in table_rows("| room | what lives there | may import |"):
        rooms = frozenset(
            room_of(module_name(REPO / p.rstrip("/")))
            if p.endswith(".py")
            else room_of(p.rstrip("/").replace("/", "."))
            for p in re.findall(r"`(nfd/[\w/.]*)`", first)
        )
        named = re.findall(r"`([\w.]+)`", last)
        rows.append(Row(rooms, frozenset(n for n in named if is_room(n)), "every room" in last))
    return tuple(rows)


def is_room(name: str) -> bool:
    """Whether a name of the last column is one of nfd's rooms or modules (``sources``,
    ``sources.memory``, ``nfd``) rather than a third-party package."""
    return name == "nfd" or is_module(f"nfd.{name}")


@cache
def row_of() -> dict[str, Row]:
    return {room: row for row in table() for room in row.rooms}


def allowed(imp: Import) -> bool:
    row = row_of()[room_of(imp.importer)]
    target_room = room_of(imp.target)
    if target_room == "nfd" or target_room in row.rooms or row.every_room:
        return True
    dotted = imp.target.removeprefix("nfd.")
    return any(dotted == a or dotted.startswith(a + ".") for a in row.allowed)


def private(imp: Import) -> bool:
    """An import of another room's ``_name`` module."""
    inner = imp.target.split(".")[2:]
    same = row_of()[room_of(imp.importer)] is row_of()[room_of(imp.target)]
    return not same and any(p.startswith("_") and not p.startswith("__") for p in inner)


# -- the table itself -----------------------------------------------------------------


def test_every_module_of_nfd_has_a_row_and_every_row_names_real_modules() -> None:
    rooms = {room_of(module_name(p)) for p in NFD.rglob("*.py")}
    assert sorted(rooms - row_of().keys()) == [], "rooms missing from docs/architecture.md's table"
    assert sorted(row_of().keys() - rooms) == [], "rows of docs/architecture.md naming no module"


def test_the_third_party_names_of_the_table_are_real_packages() -> None:
    # A room misspelled in the last column would read as a third-party name and allow
    # nothing: every name that is not a room must be importable.
    last = [cell for _, cell in table_rows("| room | what lives there | may import |")]
    others = {n.split(".")[0] for cell in last for n in re.findall(r"`([\w.]+)`", cell) if not is_room(n)}
    assert others, "the table names no third-party package: is it still parsed?"
    assert sorted(n for n in others if importlib.util.find_spec(n) is None) == []


# -- the imports against it -----------------------------------------------------------


def test_every_import_in_nfd_is_one_the_table_allows() -> None:
    assert len(imports()) > 300  # the walk found the imports
    broken = sorted(
        f"{imp.where}: {imp.importer} imports {imp.target}"
        for imp in imports()
        if (not allowed(imp) or private(imp)) and (imp.importer, imp.target) not in KNOWN_DEBT
    )
    assert broken == [], "imports docs/architecture.md does not allow (update the table, or fix the import)"


def test_no_room_imports_another_rooms_private_modules() -> None:
    broken = sorted(
        f"{imp.where}: {imp.target}"
        for imp in imports()
        if private(imp) and (imp.importer, imp.target) not in KNOWN_DEBT
    )
    assert broken == []


def test_no_import_cycles_between_rooms() -> None:
    # Every package and every top-level module is a room of its own here, even where one
    # row of the table holds several: a cycle inside a row is a cycle all the same.
    graph: dict[str, set[str]] = {}
    for imp in imports():
        a, b = room_of(imp.importer), room_of(imp.target)
        if a != b and b != "nfd" and (imp.importer, imp.target) not in KNOWN_DEBT:
            graph.setdefault(a, set()).add(b)
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    assert cycles == []


def test_import_cycles_between_modules_and_packages_are_the_listed_ones() -> None:
    # Within a room too, a cycle makes modules that can only be read (and loaded) together.
    def package(module: str) -> str:
        """A module's package; a top-level module (nfd.decision) is a node of its own."""
        if module.count(".") < 2 or (REPO / Path(*module.split(".")) / "__init__.py").is_file():
            return module
        return module.rpartition(".")[0]

    for node, known in ((str, KNOWN_CYCLES), (package, KNOWN_PACKAGE_CYCLES)):
        graph: dict[str, set[str]] = {}
        for imp in imports():
            a, b = node(imp.importer), node(imp.target)
            if a != b and b != "nfd":
                graph.setdefault(a, set()).add(b)
        cycles = {frozenset(c) for c in strongly_connected(graph) if len(c) > 1}
        assert sorted(sorted(c) for c in cycles - known.keys()) == [], "new import cycles"
        assert sorted(sorted(c) for c in known.keys() - cycles) == [], (
            "listed cycles that are gone or changed"
        )


def test_the_nodes_processes_load_no_part_of_the_master() -> None:
    # Fails on main: nfd dra imported nfd.master.kube (the master's settings and rate
    # limiter) for its API client.
    edges: dict[str, set[str]] = {}
    for imp in imports():
        edges.setdefault(imp.importer, set()).add(imp.target)
    for command in NODE_COMMANDS:
        start = f"nfd.commands.{command}"
        seen, todo, via = {start}, [start], {start: ""}
        while todo:
            module = todo.pop()
            for target in edges.get(module, ()):
                if target not in seen:
                    seen.add(target)
                    via[target] = module
                    todo.append(target)
        master = sorted(m for m in seen if room_of(m) == "master")
        assert master == [], f"nfd {command} reaches the master: {' <- '.join(chain(master[0], via))}"


def test_the_known_debt_is_still_owed() -> None:
    # A paid debt leaves the list, so that it cannot come back unnoticed.
    present = {(imp.importer, imp.target) for imp in imports()}
    assert sorted(set(KNOWN_DEBT) - present) == []
    assert all(not allowed(Import(a, b, "")) or private(Import(a, b, "")) for a, b in KNOWN_DEBT)


# -- the master's own rooms --------------------------------------------------------

MASTER_HEADER = "| master room | what lives there | may import |"


def master_room_of(module: str) -> str:
    """The master's room of one of its modules: its package below nfd/master
    (``nfd.master.core.state`` -> ``core``), or the module itself when it lies in
    nfd/master (``nfd.master.runtime`` -> ``runtime``; the package -> ``__init__``)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def master_modules() -> list[str]:
    return [module_name(p) for p in sorted((NFD / "master").rglob("*.py"))]


@cache
def master_table() -> dict[str, frozenset[str]]:
    """Each of the master's rooms -> the master's rooms it may import (its own aside)."""
    rooms = {master_room_of(m) for m in master_modules()}
    out: dict[str, frozenset[str]] = {}
    for first, last in table_rows(MASTER_HEADER):
        named = frozenset(re.findall(r"`([\w.]+)`", last))
        assert sorted(named - rooms) == [], f"names in the master's table that are none of its rooms: {last}"
        for path in re.findall(r"`(nfd/master/[\w/.]*)`", first):
            out[master_room_of(module_name(REPO / path.rstrip("/")))] = named
    return out


def master_imports() -> list[tuple[str, str, Import]]:
    """(importer's room, imported room, import) for each import between two of the
    master's rooms."""
    out = []
    for imp in imports():
        if room_of(imp.importer) == "master" and room_of(imp.target) == "master":
            a, b = master_room_of(imp.importer), master_room_of(imp.target)
            if a != b:
                out.append((a, b, imp))
    return out


def test_every_module_of_the_master_has_a_row_of_its_rooms_and_every_row_names_real_ones() -> None:
    rooms = {master_room_of(m) for m in master_modules()}
    assert {"core", "api", "runtime"} <= rooms  # the walk found the rooms
    assert sorted(rooms - master_table().keys()) == [], "rooms missing from the master's table"
    assert sorted(master_table().keys() - rooms) == [], "rows of the master's table naming no module"


def test_the_masters_table_points_only_down() -> None:
    # Read as a graph, the table itself has no cycle: its rooms are layers, the core at
    # the bottom, the app at the top.
    graph = {room: set(allowed) for room, allowed in master_table().items()}
    assert [c for c in strongly_connected(graph) if len(c) > 1] == []


def test_every_import_between_the_masters_rooms_is_one_its_table_allows() -> None:
    assert len(master_imports()) > 50  # the walk found them
    broken = sorted(
        f"{imp.where}: {imp.importer} imports {imp.target}"
        for a, b, imp in master_imports()
        if b not in master_table()[a]
    )
    assert broken == [], "imports the master's table in docs/architecture.md does not allow"


def test_no_import_cycles_between_the_masters_rooms() -> None:
    graph: dict[str, set[str]] = {}
    for a, b, _ in master_imports():
        graph.setdefault(a, set()).add(b)
    assert [c for c in strongly_connected(graph) if len(c) > 1] == []


def test_no_module_is_longer_than_the_house_allows() -> None:
    # A module past LONGEST lines does several jobs: split it by job, into modules whose
    # names say what they hold.
    lengths = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in NFD.rglob("*.py")}
    long = sorted(
        f"{path}: {n} lines" for path, n in lengths.items() if n > LONGEST and path not in LONG_BY_NATURE
    )
    assert long == []
    # An entry whose file is gone or got short again is stale.
    assert sorted(p for p in LONG_BY_NATURE if lengths.get(p, 0) <= LONGEST) == []


def chain(module: str, via: dict[str, str]) -> list[str]:
    out = [module]
    while via.get(out[-1]):
        out.append(via[out[-1]])
    return out


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out
