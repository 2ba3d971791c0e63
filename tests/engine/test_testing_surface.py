"""Tests read and poke the engine's insides only through engine/testing.py (issue #47): a
reach into `Engine._core` would tie them to how the core is arranged today, and every
rearrangement would mean rewriting tests that did not change in meaning."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# `engine._core`, `x._core.runner`, `getattr(engine, "_core")`
REACH = re.compile(r"\._core\b|[\"']_core[\"']")


def test_no_test_reaches_into_the_engine_core() -> None:
    me = Path(__file__).resolve()
    found = [f"{path.relative_to(TESTS.parent)}:{n}"
             for path in sorted(TESTS.rglob("*.py")) if path.resolve() != me
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if REACH.search(line)]
    assert not found, ("read facts with engine.testing.facts(), poke parts with "
                       "engine.testing.internals(), not Engine._core: " + ", ".join(found))


def test_the_guard_sees_a_reach() -> None:
    assert REACH.search("core = engine._core.runner")
    assert REACH.search('getattr(engine, "_core")')
    assert not REACH.search("engine_core.EngineCore")  # the module's name is fine


def test_no_test_names_how_the_runner_decides_a_ragged_pass() -> None:
    """`ModelRunner.ragged_ok` is the runner's own decision: tests ask
    engine.testing.runs_ragged() or turn it off with testing.without_ragged_passes()."""
    me = Path(__file__).resolve()
    found = [f"{path.relative_to(TESTS.parent)}:{n}"
             for path in sorted(TESTS.rglob("*.py")) if path.resolve() != me
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if "ragged_ok" in line]
    assert not found, "use engine.testing.runs_ragged / without_ragged_passes: " + ", ".join(found)
