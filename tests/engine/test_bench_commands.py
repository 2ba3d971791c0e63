"""Every module a benchmark starts as `python -m MODULE` can be run that way.

bench.speculative kept starting `python -m app serve` after the launcher moved to
`python -m batchchat`, and failed at once; only a run on a lent GPU found it. This reads the
benchmarks' sources for the modules they start, as a list or as a command string, and checks
each is runnable: a module, or a package with a `__main__`.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
IN_A_STRING = re.compile(r"-m ([A-Za-z_][\w.]*)")


def _started_modules(source: str) -> set[str]:
    """`-m X` inside a string literal, and `"-m", "X"` next to each other in a list."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(IN_A_STRING.findall(node.value))
        if isinstance(node, ast.List):
            items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            found.update(b for a, b in zip(items, items[1:], strict=False)
                         if a == "-m" and isinstance(b, str))
    return found


def _runnable(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    if spec is None:
        return False
    if spec.submodule_search_locations is None:  # a plain module
        return True
    return importlib.util.find_spec(f"{module}.__main__") is not None


def test_the_reader_finds_both_forms() -> None:
    src = 'A = "{python} -m pkg.one serve"\nB = [sys.executable, "-m", "pkg_two", "x"]\n'
    assert _started_modules(src) == {"pkg.one", "pkg_two"}
    assert not _runnable("app")  # a package without __main__: what bench.speculative ran


@pytest.mark.parametrize("path", sorted(BENCH.rglob("*.py")), ids=lambda p: p.name)
def test_each_started_module_runs(path: Path) -> None:
    missing = sorted(m for m in _started_modules(path.read_text()) if not _runnable(m))
    assert not missing, f"{path.name} starts python -m {missing}, which cannot run"
