"""Plain checks on the shape of the code: imports point one way, the engine stays small and pure,
and its output is typed rows, never bare dicts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from schemas.rows import ROW_TYPES, TableRow
from streaming.testing import run_story
from tests import stories

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("streaming", "assignors", "schemas")
#: What the engine may import: the standard library, NumPy, and these packages.
ENGINE_ALLOWED = ("streaming.engine", "streaming.alerting.rules", "streaming.alerting.evaluator", "streaming.errors",
                  "assignors", "schemas", "numpy")
ENGINE_MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Modules of the project that ``name`` imports anywhere in its code (lazy imports included)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name``, mod.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in MODULES and t != name)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]], within: str) -> list[str] | None:
    """One import cycle among the modules under ``within``, or None."""
    nodes = {n for n in graph if n == within or n.startswith(within + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n] & nodes):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(nodes):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


@pytest.mark.parametrize("package", ["streaming", "assignors", "schemas"])
def test_no_module_imports_itself_back_through_others(package):
    assert _cycle(GRAPH, package) is None, " -> ".join(_cycle(GRAPH, package))


def test_the_rooms_of_streaming_import_each_other_one_way():
    """Between rooms (engine, job, feeds, alerting, reporting, cli, ...) no two import each other."""
    def room(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if parts[0] == "streaming" and len(parts) > 1 else parts[0]

    rooms: dict[str, set[str]] = {}
    for name, targets in GRAPH.items():
        for t in targets:
            if room(t) != room(name):
                rooms.setdefault(room(name), set()).add(room(t))
    for r in rooms:
        rooms.setdefault(r, set())
    cycle = _cycle(rooms, "streaming")
    assert cycle is None, " -> ".join(cycle)


def test_assignors_and_schemas_import_nothing_of_streaming():
    for name, targets in GRAPH.items():
        if name.split(".")[0] in ("assignors", "schemas"):
            assert not [t for t in targets if t.startswith("streaming")], name


def test_the_engine_is_pure_and_small():
    for name, path in MODULES.items():
        if not name.startswith("streaming.engine"):
            continue
        lines = len(path.read_text().splitlines())
        assert lines <= ENGINE_MAX_LINES, f"{name} has {lines} lines"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in ("streaming", "assignors", "schemas", "numpy"):
                    assert module.startswith(ENGINE_ALLOWED), f"{name} imports {module}"
                else:  # the standard library, but nothing that reads a clock or does I/O
                    assert top not in ("time", "datetime", "os", "socket", "subprocess", "pyspark", "pandas",
                                       "pyarrow", "urllib", "threading", "io", "pathlib"), f"{name} imports {module}"


def test_the_engine_writes_every_row_through_a_row_type_of_its_table():
    for path in (ROOT / "streaming" / "engine").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "emit":
                (arg,) = node.args
                assert isinstance(arg, ast.Call) and getattr(arg.func, "id", "").endswith("Row"), \
                    f"{path.name}:{node.lineno} emits something else than a row"
    every_story = [stories.eager_range_story(), stories.cooperative_story(), stories.static_bounce_story(),
                   stories.streams_scale_out_story(), stories.connect_bounce_story()]
    seen = set()
    for story in every_story:
        rows, _ = run_story([story])
        assert all(isinstance(r, TableRow) and type(r) is ROW_TYPES[r.table] for r in rows)
        seen.update(r.table for r in rows)
    assert {"assignments", "revocations", "balance_metrics", "member_events"} <= seen
