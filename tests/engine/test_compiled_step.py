"""A decode batch's step replayed from one compiled graph (engine/compiled_step.py): the same
logits, bit for bit, as the step built op by op, traced once per shape, and the engine's
tokens unchanged with it on or off."""

from __future__ import annotations

import mlx.core as mx
import pytest

from engine import SamplingParams, testing
from engine import cache as kv
from engine.compiled_step import CompiledDecode
from engine.model_runner import ModelRunner
from tests.engine.conftest import (
    STAGGERED_LENGTHS,
    engine_on,
    prompts,
    quantized_tiny,
    run_staggered,
)

pytestmark = pytest.mark.usefixtures("native_built")


def _batch(runner: ModelRunner, model, ps: list[list[int]]) -> list:
    solo = []
    for p in ps:
        cache = kv.new_cache(model)
        runner.prefill(cache, p)
        solo.append(cache)
    return kv.start_batch(solo, len(ps))


def _op_by_op(runner: ModelRunner, model, cache, tokens: list[int]) -> mx.array:
    with runner._kernels():
        return model(mx.array(tokens)[:, None], cache=cache)[:, -1, :]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rows", [1, 3, 9])
def test_compiled_steps_give_the_bits_of_steps_built_op_by_op(seed, rows) -> None:
    tiny = quantized_tiny(seed)
    runner = ModelRunner(tiny.model)
    assert runner.compiled is not None
    ps = prompts(rows, seed=seed)
    compiled, plain = _batch(runner, tiny.model, ps), _batch(runner, tiny.model, ps)
    assert CompiledDecode.usable(compiled)
    tokens = [p[-1] for p in ps]
    for step in range(12):
        if step == 6:  # buffers grow one layer a step (cache.grow_ahead): widths differ
            compiled[0].grow_columns()
            assert compiled[0].keys.shape[2] > compiled[1].keys.shape[2]
        got = runner.compiled.step(compiled, tokens)
        want = _op_by_op(runner, runner.model, plain, tokens)  # the engine's own modules
        mx.eval(got, want)
        assert mx.array_equal(got, want).item()
        assert compiled[0].lengths == plain[0].lengths
        tokens = mx.argmax(want, axis=-1).tolist()
    assert runner.compiled.traces == 2  # one graph, replayed; another for the grown layer


def test_a_new_shape_is_traced_once_and_a_failed_step_keeps_the_buffers(monkeypatch) -> None:
    """Steps of one shape replay one graph; fewer rows or a grown buffer are other shapes,
    traced once each. A step that raises leaves every layer's buffers where they were."""
    tiny = quantized_tiny(4)
    runner = ModelRunner(tiny.model)
    ps = prompts(4, seed=4)
    cache = _batch(runner, tiny.model, ps)
    for _ in range(3):
        mx.eval(runner.compiled.step(cache, [p[-1] for p in ps]))
    assert runner.compiled.traces == 1
    kv.keep_rows(cache, [0, 1])
    for _ in range(3):
        mx.eval(runner.compiled.step(cache, [1, 2]))
    assert runner.compiled.traces == 2
    widths = {cache[0].keys.shape[2]}
    while len(widths) < 3 or len({layer.keys.shape[2] for layer in cache}) > 1:
        # every layer's buffer grows, one layer a step, twice
        mx.eval(runner.decode(cache, [1, 2]))
        kv.grow_ahead(cache)
        widths |= {layer.keys.shape[2] for layer in cache}
    mx.eval(runner.decode(cache, [1, 2]))
    # steps while the layers grow one by one are built op by op: one more trace per size
    assert runner.compiled.traces == 2 + 2
    traces = runner.compiled.traces
    for _ in range(3):
        mx.eval(runner.compiled.step(cache, [1, 2]))
    assert runner.compiled.traces == traces
    before = [(layer.keys, layer.values, list(layer.lengths)) for layer in cache]

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(runner.compiled, "_step", broken)
    with pytest.raises(RuntimeError, match="boom"):
        runner.compiled.step(cache, [1, 2])
    assert [(layer.keys, layer.values, layer.lengths) for layer in cache] == [
        (k, v, n) for k, v, n in before]


def test_the_engine_gives_the_same_tokens_with_compiled_steps_or_without() -> None:
    """Staggered requests (solo, batched, joining, leaving), greedy and seeded, and two
    long ones whose KV buffers grow while they decode."""
    tiny = quantized_tiny(5)
    ps = prompts(len(STAGGERED_LENGTHS), seed=5)
    answers = {}
    for on in (True, False):
        engine = engine_on(tiny, max_concurrent=8, compiled_decode=on)
        streams = run_staggered(engine, ps)
        seeded = engine.submit(prompt_tokens=ps[0], params=SamplingParams(
            max_tokens=12, temperature=0.8, top_p=0.9, seed=3))
        others = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=12))
                  for p in ps[1:4]]
        # long enough for the buffers to grow, one layer a step, while the batch decodes
        others += [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=300))
                   for p in ps[4:6]]
        while engine.has_work():
            engine.step()
        answers[on] = [s.tokens for s in streams + [seeded] + others]
        traces = testing.facts(engine).compiled_traces
        assert (traces is not None) == on
        if on:
            assert traces >= 2
    assert answers[True] == answers[False]
    assert [len(t) for t in answers[True][-2:]] == [300, 300]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_lone_sequence_s_compiled_steps_give_the_bits_of_mlx_lm_s_cache(seed) -> None:
    """A lone sequence keeps mlx-lm's KVCache, whose buffer is one slot row: its steps are
    replayed too, with the bits of the step built op by op, through the buffer's growth
    (a full buffer is grown by the op-by-op step, then the next size is traced)."""
    tiny = quantized_tiny(seed)
    runner = ModelRunner(tiny.model)
    prompt = prompts(1, seed=seed)[0] * 6  # ~6 .. 240 tokens
    compiled, plain = kv.new_cache(tiny.model), kv.new_cache(tiny.model)
    runner.prefill(compiled, prompt)
    runner.prefill(plain, prompt)
    token, grown = prompt[-1], 0
    for _ in range(300):
        usable = CompiledDecode.usable(compiled)
        got = runner.decode(compiled, [token])
        want = _op_by_op(runner, runner.model, plain, [token])
        mx.eval(got, want)
        assert mx.array_equal(got, want).item()
        assert compiled[0].offset == plain[0].offset
        grown += not usable
        token = int(mx.argmax(want, axis=-1).item())
    assert grown >= 1 and runner.compiled.traces == 2


def test_a_request_s_decode_replays_one_graph_whatever_fed_its_tokens() -> None:
    """A lone request's steps within one KV buffer are one shape: its first decode step is
    fed the prompt's sample and the rest their own samples, and all replay one graph (a
    token array of another dtype would be another trace, on every request's first step)."""
    tiny = quantized_tiny(6)
    engine = engine_on(tiny, max_concurrent=1)
    prompt = prompts(1, seed=6)[0]
    for params in (SamplingParams(max_tokens=20),
                   SamplingParams(max_tokens=20, temperature=0.7, top_p=0.95, min_p=0.05,
                                  repetition_penalty=1.1, seed=1)):
        before = testing.facts(engine).compiled_traces
        stream = engine.submit(prompt_tokens=prompt, params=params)
        while engine.has_work():
            engine.step()
        assert len(stream.tokens) == 20
        assert testing.facts(engine).compiled_traces - before <= 1
