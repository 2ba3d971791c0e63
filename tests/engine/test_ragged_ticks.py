"""A tick that decodes and prefills runs one forward pass (engine/ragged_pass.py), and the
tokens stay mlx-lm's; where the model's passes cannot be ragged, the separate passes run."""

from __future__ import annotations

import pytest

from engine import SamplingParams, testing
from tests.engine.conftest import prompts, reference_tokens, run_to_end

N = 12


def counting(make_engine, monkeypatch, **config):
    """An engine whose runner lists its forward passes by kind."""
    engine = make_engine(**({"max_concurrent": 8} | config))
    if not testing.facts(engine).ragged:
        pytest.skip("this model's passes are not ragged here (no native kernels)")
    calls: list[str] = []
    runner = testing.internals(engine).runner
    for name in ("decode", "prefill", "prefill_many", "ragged"):
        real = getattr(runner, name)
        monkeypatch.setattr(runner, name,
                            lambda *a, _real=real, _name=name, **kw:
                            calls.append(_name) or _real(*a, **kw))
    return engine, calls


@pytest.fixture
def counted(make_engine, monkeypatch):
    return counting(make_engine, monkeypatch)


def test_prompts_arriving_while_rows_decode_share_their_pass(tiny, make_engine,
                                                            monkeypatch) -> None:
    # an allowance of 64 prompt tokens a tick: the three prompts fit in one
    engine, calls = counting(make_engine, monkeypatch, min_prefill_tokens=64,
                             shared_min_prefill_tokens=64)
    early = prompts(3, seed=5)
    late = prompts(4, seed=6)[1:]  # 3, 17 and 40 tokens
    first = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N)) for p in early]
    for _ in range(3):
        engine.step()
    assert engine.telemetry()[-1].decode_rows == 3
    second = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N)) for p in late]
    calls.clear()
    engine.step()  # the three rows' step and the three new prompts: one pass
    assert calls == ["ragged"]
    tick = engine.telemetry()[-1]
    assert tick.decode_rows == 3 and tick.prefill_tokens == sum(len(p) for p in late)
    assert all(len(s.tokens) == 1 for s in second)  # each prompt's first token, from it
    engine.step()
    assert engine.telemetry()[-1].decode_rows == 6  # they joined the batch
    run_to_end(engine)
    for p, s in zip(early + late, first + second, strict=True):
        assert s.tokens == reference_tokens(tiny.model, p, N)


def test_a_lone_decoder_and_a_long_prompt_share_passes(tiny, make_engine, monkeypatch) -> None:
    """The solo fast path's row (its own cache, no batch yet) is a segment of the pass.
    The first tick uses the step it started ahead (prefill in a pass of its own); the
    prompt's later chunks share the row's passes."""
    engine, calls = counting(make_engine, monkeypatch, prefill_burst=8, whole_prompt_tokens=0)
    a, b = [3, 1, 4], prompts(4, seed=9)[3]  # b: 40 tokens, 8 a tick
    sa = engine.submit(prompt_tokens=a, params=SamplingParams(max_tokens=2 * N))
    for _ in range(3):
        engine.step()
    assert not testing.facts(engine).batched
    sb = engine.submit(prompt_tokens=b, params=SamplingParams(max_tokens=N))
    calls.clear()
    engine.step()
    assert calls == ["prefill"]  # the row took its started step; none started ahead now
    calls.clear()
    engine.step()
    assert calls == ["ragged"] and not testing.facts(engine).batched
    run_to_end(engine)
    assert sa.tokens == reference_tokens(tiny.model, a, 2 * N)
    assert sb.tokens == reference_tokens(tiny.model, b, N)


def test_a_decode_only_tick_keeps_the_plain_decode_pass(counted) -> None:
    engine, calls = counted
    engine.submit(prompt_tokens=[1, 2, 3], params=SamplingParams(max_tokens=N))
    engine.submit(prompt_tokens=[4, 5], params=SamplingParams(max_tokens=N))
    engine.step()
    calls.clear()
    engine.step()
    assert calls == ["decode"]


def test_a_shared_pass_lets_go_of_its_caches_without_the_cyclic_gc(make_engine,
                                                                  monkeypatch) -> None:
    """A pass's layers point back at the pass; left as a cycle it held every cache of the
    pass (the slot batch's buffers too) until Python's cyclic GC ran: ~370 MiB of KV after
    60 requests on the bundled model, beyond the KV budget (issue #28)."""
    import gc
    import weakref

    from engine import ragged_pass

    engine, calls = counting(make_engine, monkeypatch, min_prefill_tokens=64,
                             shared_min_prefill_tokens=64)
    passes: list[weakref.ref] = []
    real_init = ragged_pass.RaggedPass.__init__

    def init(self, *args, **kwargs) -> None:
        real_init(self, *args, **kwargs)
        passes.append(weakref.ref(self))

    monkeypatch.setattr(ragged_pass.RaggedPass, "__init__", init)
    gc.collect()
    gc.disable()
    try:
        for p in prompts(3, seed=5):
            engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N))
        for _ in range(3):
            engine.step()
        for p in prompts(4, seed=6)[1:]:
            engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N))
        run_to_end(engine)
        assert "ragged" in calls and passes
        assert [ref() for ref in passes] == [None] * len(passes)
    finally:
        gc.enable()
