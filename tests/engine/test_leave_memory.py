"""Rows leaving a batch whose buffers go (the batch ends, or it is cut to fit the rows left)
are copied out a layer at a time, each layer's old buffer let go before the next layer's
copies are made (DecodeBatch._copy_out_layer_by_layer / _leave_layer_by_layer): the leave
no longer holds every copy beside the whole batch buffer, which made a busy session's
highest MLX peak (docs/memory.md). The copies stay exact: next turns reuse them and give
mlx-lm's own tokens."""

from __future__ import annotations

import mlx.core as mx
import pytest

from engine import (
    Engine,
    EngineConfig,
    SamplingParams,
    decode_batch,
    kv_policy,
    slot_cache,
    testing,
)
from tests.engine.conftest import reference_tokens, run_to_end
from tests.tiny_model import make_tiny_model


@pytest.fixture(scope="module")
def deep():
    """Eight layers, so a layer's share of a leave is an eighth of it; wide enough (2 KiB of
    KV a token a layer) that the copies are not lost in the allocator's rounding."""
    return make_tiny_model(seed=3, layers=8, hidden=512)


def _long_prompts(n: int, seed: int) -> list[list[int]]:
    """Prompts of ~200 tokens: a row's KV is then most of its buffer's width (256
    columns), as in a long chat."""
    import random

    rng = random.Random(seed)
    return [[rng.randrange(0, 256) for _ in range(190 + 5 * i)] for i in range(n)]


def _engine(deep, budget: int) -> Engine:
    return Engine(deep.model, deep.tokenizer, eos_token_ids=[],
                  context_length=deep.context_length,
                  config=EngineConfig(max_concurrent=8, kv_budget_bytes=budget),
                  description="tiny test model, 8 layers")


def _leaves(monkeypatch) -> list[dict]:
    """Each leave with rows copied out: MLX's rise over what was live as it began, and the
    bytes copied out (what KvPolicy.keep_finished was handed)."""
    seen: list[dict] = []
    copied = [0]
    keep = kv_policy.KvPolicy.keep_finished

    def counted(self, seq, cache):  # type: ignore[no-untyped-def]
        copied[0] += sum(c.keys.nbytes + c.values.nbytes for c in cache)
        return keep(self, seq, cache)

    drop = decode_batch.DecodeBatch.drop_finished

    def measured(self, keep_fn, **kw):  # type: ignore[no-untyped-def]
        copied[0] = 0
        live = mx.get_active_memory()
        mx.reset_peak_memory()
        rows = len(self.seqs)
        drop(self, keep_fn, **kw)
        if copied[0]:
            seen.append({"rise": mx.get_peak_memory() - live, "copied": copied[0],
                         "rows_before": rows, "rows_after": len(self.seqs)})

    monkeypatch.setattr(kv_policy.KvPolicy, "keep_finished", counted)
    monkeypatch.setattr(decode_batch.DecodeBatch, "drop_finished", measured)
    return seen


def test_a_batch_cut_and_then_ended_copies_its_rows_out_a_layer_at_a_time(deep, monkeypatch):
    monkeypatch.setattr(slot_cache, "SHRINK_MIN_BYTES", 0)  # the tiny buffers shrink too
    seen = _leaves(monkeypatch)
    starts = _long_prompts(6, seed=7)
    lengths = [12, 12, 12, 12, 40, 40]  # four leave a batch of six, then the last two
    per_token = _engine(deep, 1 << 30).stats().kv_bytes_per_token
    # room for the six requests' set-asides and nothing else: their prompts' cached
    # entries give way as they are admitted, so the finished rows are copied out whole
    budget = sum(per_token * (len(p) + n + 256) for p, n in zip(starts, lengths, strict=True))
    engine = _engine(deep, budget)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n))
               for p, n in zip(starts, lengths, strict=True)]
    run_to_end(engine)

    shapes = [(leave["rows_before"], leave["rows_after"]) for leave in seen]
    assert shapes == [(6, 2), (2, 0)]
    for leave in seen:
        # all the copies beside the whole buffer was the rise before; now about a layer's
        assert leave["rise"] < leave["copied"] / 2, leave
    for prompt, stream, n in zip(starts, streams, lengths, strict=True):
        assert stream.tokens == reference_tokens(deep.model, prompt, n)


def test_rows_copied_out_a_layer_at_a_time_serve_next_turns_exactly(deep, monkeypatch):
    seen = _leaves(monkeypatch)
    starts = _long_prompts(4, seed=9)
    lengths = [6, 6, 6, 30]  # three leave, one goes on alone
    per_token = _engine(deep, 1 << 30).stats().kv_bytes_per_token
    budget = sum(per_token * (len(p) + n + 256) for p, n in zip(starts, lengths, strict=True))
    engine = _engine(deep, budget)
    # no room for spare buffers, so none is kept: the batch's buffers go as it ends
    monkeypatch.setattr(testing.internals(engine).kv, "free_bytes", lambda: 0)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n))
               for p, n in zip(starts, lengths, strict=True)]
    run_to_end(engine)
    assert [(leave["rows_before"], leave["rows_after"]) for leave in seen][:1] == [(4, 1)]
    assert seen[0]["rise"] < seen[0]["copied"] / 2, seen[0]
    for prompt, stream, n in zip(starts, streams, lengths, strict=True):
        assert stream.tokens == reference_tokens(deep.model, prompt, n)
        turn = prompt + stream.tokens + [65, 66]
        again = engine.submit(prompt_tokens=turn, params=SamplingParams(max_tokens=4))
        run_to_end(engine)
        if n == 6:  # the rows copied out (the lone one's entry may have given way)
            assert again.stats.cached_tokens == len(prompt) + n - 1
        assert again.tokens == reference_tokens(deep.model, turn, 4)
