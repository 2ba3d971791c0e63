"""Decode first, budgeted chunked prefill, burst limit, priorities, adaptive budget."""

from engine import EngineConfig, SamplingParams
from engine.scheduler import BudgetController
from tests.engine.conftest import prompts, run_to_end


def test_long_prompt_is_chunked_and_never_freezes_decoding(make_engine):
    engine = make_engine(max_concurrent=4, prefill_burst=32)
    decoders = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=60))
                for p in prompts(2, seed=3)]
    for _ in range(3):
        engine.step()
    long = engine.submit(prompt_tokens=list(range(200)), params=SamplingParams(max_tokens=5))
    counts = [len(d.tokens) for d in decoders]
    prefill_ticks = 0
    while not long.tokens:
        engine.step()
        tick = engine.telemetry()[-1]
        prefill_ticks += 1
        assert tick.prefill_tokens <= 32  # the burst limit
        now = [len(d.tokens) for d in decoders]
        assert all(b == a + 1 for a, b in zip(counts, now, strict=True))  # nobody waited
        counts = now
    assert prefill_ticks >= 199 // 32  # it really was split up
    run_to_end(engine)


def test_first_token_priority_and_interactive_before_background(make_engine):
    engine = make_engine(max_concurrent=4, prefill_burst=16, min_prefill_tokens=16,
                         max_token_budget=20)
    bg = engine.submit(prompt_tokens=list(range(100)), params=SamplingParams(max_tokens=2),
                       priority="background")
    engine.step()  # background starts prefilling (nobody else is there)
    fg = engine.submit(prompt_tokens=list(range(40)), params=SamplingParams(max_tokens=2),
                       priority="interactive")
    while not fg.tokens:
        engine.step()
    assert not bg.tokens  # the interactive prompt took the prefill budget first
    run_to_end(engine)
    assert bg.finish_reason == fg.finish_reason == "length"


def test_budget_shrinks_when_prefill_is_slow_and_grows_when_fast():
    cfg = EngineConfig(target_step_s=0.1, decode_slack=1.5, max_token_budget=1024,
                       min_prefill_tokens=8, ewma_alpha=0.5)
    ctl = BudgetController(cfg)
    assert ctl.budget(decode_rows=0) == 1024  # nobody decoding: prefill at full speed
    for _ in range(40):  # decode 50 ms, prefill 1 ms/token -> (0.1 - 0.05) / 0.001 = 50
        ctl.observe(4, 0.05, 100, 0.1, 0.15)
    assert ctl.budget(decode_rows=4) == 4 + 50
    for _ in range(40):  # prefill got 10x cheaper: the budget grows 10x
        ctl.observe(4, 0.05, 100, 0.01, 0.06)
    assert ctl.budget(decode_rows=4) == 4 + 500
    for _ in range(40):  # a slow decode raises the target to slack * decode
        ctl.observe(4, 0.2, 100, 0.1, 0.3)
    assert ctl.budget(decode_rows=4) == 4 + 100  # (1.5 * 0.2 - 0.2) / 0.001
    for _ in range(40):  # absurdly slow prefill: still the minimum, so prompts progress
        ctl.observe(4, 0.05, 10, 10.0, 10.0)
    assert ctl.budget(decode_rows=4) == 4 + 8


def test_engine_budget_adapts_from_measured_step_times(make_engine):
    engine = make_engine(max_concurrent=4, prefill_burst=64, target_step_s=0.001)
    for p in prompts(2):
        engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=80))
    engine.submit(prompt_tokens=[i % 250 for i in range(300)], params=SamplingParams(max_tokens=2))
    run_to_end(engine)
    budgets = {t.budget for t in engine.telemetry() if t.decode_rows}
    assert len(budgets) > 1  # it moved with the measurements
