"""No import circle runs at import time (#47 "No import circles").

lint-imports forbids circles between packages (pyproject.toml's acyclic_siblings contracts),
but counts every import, so the circles it lists as left close through a type hint or an
import inside a function. This check is the other half: among the imports a module runs
when it is loaded (module level, class bodies, module-level if/try blocks; not under
`if TYPE_CHECKING:`, not inside a function), no two modules of the product import each
other, directly or round a longer circle, where the order of loading would decide what a
half-loaded module has."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("batchchat", "app", "engine", "ui")


def _source(module: str) -> Path:
    base = ROOT.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def load_time_lines(tree: ast.Module) -> set[int]:
    """Line numbers of the imports a module runs when it is loaded."""
    lines: set[int] = set()

    def walk(nodes: Iterable[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                lines.add(node.lineno)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue  # runs when called
            elif isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.ClassDef):
                walk(node.body)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    walk(getattr(node, field, None) or [])
                for case in getattr(node, "cases", None) or []:
                    walk(case.body)

    walk(tree.body)
    return lines


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = itertools.count()

    def visit(v: str) -> None:
        index[v] = low[v] = next(counter)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def load_time_edges() -> dict[str, set[str]]:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, cache_dir=None)
    edges: dict[str, set[str]] = {}
    for module in sorted(graph.modules):
        run = load_time_lines(ast.parse(_source(module).read_text(encoding="utf-8")))
        for imported in graph.find_modules_directly_imported_by(module):
            details = graph.get_import_details(importer=module, imported=imported)
            if any(d["line_number"] in run for d in details):
                edges.setdefault(module, set()).add(imported)
    return edges


def test_no_import_circle_runs_at_import_time() -> None:
    found = circles(load_time_edges())
    assert not found, ("modules that import each other when loaded (make one side's import "
                       f"lazy or a type hint, or move what both need): {found}")


def test_the_check_sees_what_runs_at_import_time() -> None:
    code = ast.parse(
        "import a\n"
        "if TYPE_CHECKING:\n    import b\n"
        "try:\n    import c\nexcept ImportError:\n    import d\n"
        "class K:\n    import e\n"
        "def f():\n    import g\n"
        "if typing.TYPE_CHECKING:\n    import h\nelse:\n    import i\n")
    assert load_time_lines(code) == {1, 5, 7, 9, 15}
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
