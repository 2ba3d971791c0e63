"""Issue #46 item 14: an idle engine gives back the memory kept for reuse (MLX's buffer
cache, glibc's freed memory, engine/cpu_memory.py): IDLE_RELEASE_S after its last request
and after it starts (what an engine before it left), never between back-to-back requests."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

import engine.engine as engine_module
import engine.worker as worker
from engine import SamplingParams

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def releases(monkeypatch) -> list[float]:
    calls: list[float] = []
    monkeypatch.setattr(worker, "IDLE_RELEASE_S", 0.3)
    monkeypatch.setattr(engine_module, "_give_back_memory",
                        lambda: calls.append(0.0))
    return calls


async def test_memory_goes_back_when_idle_not_between_requests(make_engine, releases):
    engine = make_engine()
    await engine.start()
    await asyncio.sleep(0.6)
    assert len(releases) == 1  # after the start
    for _ in range(5):  # back to back: no release in between
        await engine.submit(prompt_tokens=[1, 2], params=SamplingParams(max_tokens=4)).result()
    assert len(releases) == 1
    await asyncio.sleep(0.6)
    assert len(releases) == 2  # once, after the last one
    await asyncio.sleep(0.6)
    assert len(releases) == 2  # asleep, not releasing again and again
    await engine.shutdown()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_memory_kept_for_reuse_is_given_back() -> None:
    result = subprocess.run([sys.executable, "-m", "tests.engine.memory_give_back_run"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    if not out["tuned"]:
        pytest.skip("not glibc")
    held, freed, after = out["rise_mib"]
    assert held >= 180 and freed >= 180  # kept for reuse (the trim threshold is 256 MiB)
    assert out["gave"] and after < 32


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_a_busy_engines_freed_memory_is_bounded() -> None:
    """Holes freed in the middle of glibc's heap stay resident (no trim threshold returns
    them): up to SPARE_CAP they are kept for reuse; over it bound_freed_memory gives them
    back, looking at most every SPARE_CHECK_S, and not again for memory it already gave
    back; also when they come from live data that shrank, RSS not rising at all."""
    result = subprocess.run([sys.executable, "-m", "tests.engine.memory_spare_run"],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    if not out["tuned"]:
        pytest.skip("not glibc")
    steps = out["steps"]
    assert out["cap_mib"] == 256
    held, rss, gave = steps["under"]
    assert 180 <= held < 256 and rss >= 350 and not gave  # kept for reuse
    assert not steps["soon"][2]  # not looked at yet
    held, rss, gave = steps["over"]
    assert held > 256 and gave and rss < 150  # 288 MiB of holes went back
    assert not steps["again"][2]  # held still counts them, but they are not resident
    held, live_rss, gave = steps["live"]
    assert live_rss >= 350 and not gave  # live data, not freed memory
    held, rss, gave = steps["shrunk"]
    assert held > 256 and gave and rss < live_rss - 200  # 288 MiB went back
