"""Engine.load's warm-up (engine/warm_up.py): two short requests at load pay the first
reply's one-time costs (MLX's kernels compiled on first use, the compiled step's traces).
The engine it returns shows nothing of them: no statistics, no cached prefixes, no request
ids used, and the same answers as an engine loaded without it. A warm-up that fails leaves
the engine as it was."""

from __future__ import annotations

import logging

import pytest

from engine import Engine, EngineConfig, SamplingParams, testing
from engine import warm_up as warming

pytestmark = pytest.mark.bundled

TABS = dict(temperature=0.7, top_p=0.95, min_p=0.05, repetition_penalty=1.1, seed=11)
MESSAGES = [{"role": "user", "content": "Name three rivers."}]


def answer(engine: Engine, params: SamplingParams) -> list[int]:
    stream = engine.submit(MESSAGES, params=params)
    while engine.has_work():
        engine.step()
    assert stream.error is None
    return stream.tokens


def test_a_warmed_engine_shows_nothing_of_its_warm_up_and_answers_the_same() -> None:
    seen: list[tuple[str, float]] = []
    warm = Engine.load("bundled", EngineConfig(warm_up=True),
                       progress=lambda stage, f: seen.append((stage, f)))
    # the load says it warms up, last, and still ends at 100 %
    assert list(dict.fromkeys(s for s, _ in seen))[-2:] == ["starting the engine", "warming up"]
    assert [f for _, f in seen] == sorted(f for _, f in seen) and seen[-1][1] == 1.0
    cold = Engine.load("bundled", EngineConfig(warm_up=False))
    # the model runner's decode graphs were traced at load, on the warm engine only
    assert testing.facts(warm).compiled_traces > 0
    assert testing.facts(cold).compiled_traces == 0
    stats = warm.stats()
    assert (stats.completed, stats.total_generated_tokens, stats.total_prompt_tokens,
            stats.ticks, stats.prefix_entries, stats.active, stats.queued) == (0,) * 7
    assert warm.finished_requests() == [] and warm.telemetry() == []
    assert not warm.has_work()
    first = warm.submit(MESSAGES, params=SamplingParams(max_tokens=1))
    assert first.request_id.endswith("-1")  # the warm-up used no request id of the engine's
    while warm.has_work():
        warm.step()
    for params in (SamplingParams(max_tokens=24), SamplingParams(max_tokens=24, **TABS)):
        assert answer(warm, params) == answer(cold, params)


def test_a_warm_up_that_fails_leaves_the_engine_as_it_was(monkeypatch, caplog) -> None:
    engine = Engine.load("bundled", EngineConfig(warm_up=False))
    # the first request goes in, the second is refused (max_tokens 0): the first must end
    monkeypatch.setattr(warming, "REQUESTS", [{"max_tokens": 4}, {"max_tokens": 0}])
    with caplog.at_level(logging.WARNING, logger="engine.warm_up"):
        assert engine.warm_up() is None
    assert "warm-up at load failed" in caplog.text
    assert not engine.has_work()
    stats = engine.stats()
    assert (stats.active, stats.queued, stats.completed, stats.ticks) == (0, 0, 0, 0)
    assert len(answer(engine, SamplingParams(max_tokens=6))) == 6
    # and one that works returns its time
    monkeypatch.setattr(warming, "REQUESTS", [{"max_tokens": 2}])
    assert engine.warm_up() > 0
