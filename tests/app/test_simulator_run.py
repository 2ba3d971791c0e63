"""The load simulator's core on the tiny model: accounting, cancellation, stop, persistence."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.backend import LocalBackend, LocalTarget
from app.simulator.__main__ import config_from_args, format_summary, parse_args, simulate
from app.simulator.config import SimConfig
from app.simulator.run import SimulationRun
from app.storage import Store
from engine import Engine, EngineConfig
from tests.tiny_model import make_tiny_model

FINAL = {"length", "stop", "cancelled", "error", "shutdown"}


@pytest.fixture(scope="module")
def tiny():
    return make_tiny_model(context_length=2048)


@pytest.fixture
async def engine(tiny) -> AsyncIterator[Engine]:
    eng = Engine(tiny.model, tiny.tokenizer, eos_token_ids=[], context_length=tiny.context_length,
                 config=EngineConfig(max_concurrent=8))
    await eng.start()
    yield eng
    await eng.shutdown()


def backend(engine: Engine) -> LocalBackend:
    """What the simulator CLI runs on: a LocalBackend over the engine's LocalTarget."""
    return LocalBackend(LocalTarget(engine))


def burst(n: int, **kw) -> SimConfig:
    """All n requests at once (one burst), short replies: a fast run."""
    return SimConfig(arrival="burst", burst_size=n, burst_every_s=0.0, num_requests=n,
                     max_tokens_min=3, max_tokens_max=6, seed=7, **kw)


async def settle(engine: Engine) -> None:
    for _ in range(200):
        if not engine.has_work():
            return
        await asyncio.sleep(0.01)


async def test_twenty_requests_all_accounted_and_saved(engine, tmp_path: Path):
    store = Store.open(tmp_path / "h.db")
    run = SimulationRun(backend(engine), burst(20), store)
    sent, completed = [], []
    run.sent.connect(sent.append)
    run.completed.connect(completed.append)
    summary = await run.start()

    assert len(sent) == len(completed) == len(run.results) == 20
    assert all(r.finish_reason in FINAL for r in run.results)
    assert summary["requests"] == 20 and summary["unaccounted"] == 0
    assert summary["completed"] + summary["cancelled"] + summary["failed"] == 20
    assert summary["completed"] == 20  # no cancel probability, no end token: all "length"
    assert summary["total_output_tokens"] == sum(r.output_tokens for r in run.results)
    assert all(3 <= r.output_tokens <= 6 for r in run.results)
    assert summary["ttft_s"]["n"] == 20 and summary["ttft_s"]["p99"] >= summary["ttft_s"]["median"]

    loaded = store.load_sim_run(run.record.id)
    assert loaded.run.ended_at is not None and loaded.run.summary["completed"] == 20
    assert loaded.run.config["num_requests"] == 20 and loaded.run.config["seed"] == 7
    assert sorted(r.seq for r in loaded.results) == list(range(20))
    assert sum(r.generated_tokens for r in loaded.results) == summary["total_output_tokens"]
    # Simulated requests ran at background priority with simulation tags.
    finished = [s for s in engine.finished_requests() if s.tag and s.tag.startswith("sim-")]
    assert len(finished) == 20 and {s.priority for s in finished} == {"background"}
    store.close()


async def test_cancellations_are_counted(engine):
    cfg = burst(10, cancel_probability=1.0)
    cfg.max_tokens_min = cfg.max_tokens_max = 300
    run = SimulationRun(backend(engine), cfg)
    summary = await run.start()
    assert summary["cancelled"] == 10 and summary["completed"] == 0
    # Each was cancelled mid-stream, long before its max_tokens.
    assert all(0 < r.output_tokens < 300 for r in run.results)
    engine_side = [s for s in engine.finished_requests() if s.finish_reason == "cancelled"]
    assert len(engine_side) == 10


async def test_some_cancelled_some_not(engine):
    cfg = burst(16, cancel_probability=0.5)
    cfg.max_tokens_min = cfg.max_tokens_max = 200
    run = SimulationRun(backend(engine), cfg)
    summary = await run.start()
    cancelled = [r for r in run.results if r.finish_reason == "cancelled"]
    assert summary["cancelled"] == len(cancelled)
    assert summary["completed"] == 16 - len(cancelled)
    assert 0 < len(cancelled) < 16  # seed 7 draws both outcomes
    assert all(r.output_tokens == 200 for r in run.results if r.finish_reason == "length")


async def test_start_and_stop_at_once_leaves_nothing_running(engine):
    cfg = SimConfig(arrival="uniform", uniform_low_s=0.5, uniform_high_s=0.5, num_requests=50,
                    max_tokens_min=200, max_tokens_max=200, seed=1)
    run = SimulationRun(backend(engine), cfg)
    task = run.start()
    await asyncio.sleep(0)  # the first request goes out
    run.stop()
    summary = await asyncio.wait_for(task, timeout=30)
    assert summary["stopped"] and summary["unaccounted"] == 0
    assert len(run.results) < 50  # sending ended
    assert all(r.finish_reason == "cancelled" for r in run.results)
    await settle(engine)
    stats = engine.stats()
    assert stats.active == 0 and stats.queued == 0 and not engine.has_work()


async def test_stop_mid_run_cancels_outstanding(engine):
    cfg = burst(8)
    cfg.max_tokens_min = cfg.max_tokens_max = 400
    run = SimulationRun(backend(engine), cfg)
    started = asyncio.Event()
    run.sent.connect(lambda row: started.set())
    task = run.start()
    await started.wait()
    await asyncio.sleep(0.2)
    run.stop()
    summary = await asyncio.wait_for(task, timeout=30)
    assert summary["requests"] == 8 and summary["cancelled"] == 8 and summary["unaccounted"] == 0
    await settle(engine)
    assert engine.stats().active == 0


async def test_concurrency_limit_applies_during_the_run_and_is_restored(engine):
    cfg = burst(4, max_concurrent=1)
    run = SimulationRun(backend(engine), cfg)
    await run.start()
    rows = [t.decode_rows for t in engine.telemetry()]
    assert max(rows) == 1  # one at a time, though all four were sent together
    assert engine.max_concurrent == 8


async def test_duration_bounds_sending(engine):
    cfg = SimConfig(arrival="uniform", uniform_low_s=0.1, uniform_high_s=0.1,
                    num_requests=None, duration_s=0.35, max_tokens_min=2, max_tokens_max=2)
    run = SimulationRun(backend(engine), cfg)
    summary = await run.start()
    # Sends at 0, 0.1, 0.2, 0.3 s at most; sleeping never ends early, so never more.
    assert 1 <= summary["requests"] <= 4 and summary["unaccounted"] == 0


async def test_uniform_gaps_are_respected_by_the_run(engine):
    cfg = SimConfig(arrival="uniform", uniform_low_s=0.05, uniform_high_s=0.08, num_requests=6,
                    max_tokens_min=2, max_tokens_max=2, seed=3)
    run = SimulationRun(backend(engine), cfg)
    await run.start()
    sends = [r.send_t for r in run.results]
    assert all(b - a >= 0.05 for a, b in zip(sends, sends[1:], strict=False))


async def test_randomized_sampling_draws_within_ranges(engine):
    cfg = burst(6, sampling="random", temperature=0.2, temperature_max=0.9, top_p=0.95,
                top_p_min=0.5)
    import random

    rng = random.Random(0)
    drawn = [cfg.sampling_for(rng) for _ in range(200)]
    assert all(0.2 <= d["temperature"] <= 0.9 and 0.5 <= d["top_p"] <= 0.95 for d in drawn)
    assert len({round(d["temperature"], 6) for d in drawn}) > 100
    summary = await SimulationRun(backend(engine), cfg).start()
    assert summary["completed"] == 6


async def test_cli_simulate_and_summary_text(engine, capsys):
    args = parse_args(["--requests", "5", "--arrival", "burst", "--burst-size", "5",
                       "--max-tokens", "2:4", "--seed", "2", "--concurrency", "3"])
    cfg = config_from_args(args)
    assert (cfg.max_tokens_min, cfg.max_tokens_max, cfg.max_concurrent) == (2, 4, 3)
    run = await simulate(backend(engine), cfg)
    out = capsys.readouterr().out
    assert out.count("length") == 5  # one line per request
    text = format_summary(run.summary)
    assert "requests 5: completed 5, cancelled 0, failed 0" in text
    assert "TTFT" in text and "ITL" in text
