"""A finished batch row's KV is kept by writing only what its prompt's cached entry lacks
into that entry's buffer (PrefixCache.extend, issue #47), not by copying the whole row out;
the entry then serves a next turn exactly, and nobody holding the old entry sees a change."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import KVCache

from engine import SamplingParams
from engine import cache as kv
from engine.prefix_cache import PrefixCache, alias
from tests.engine.conftest import prompts, reference_tokens, run_to_end

H, D = 2, 8


def _filled(n: int, width: int, seed: int) -> KVCache:
    """A prompt's cache as mlx-lm's prefill leaves it: `n` positions in a `width` buffer."""
    rng = np.random.default_rng(seed)
    cache = KVCache()
    cache.keys = mx.zeros((1, H, width, D))
    cache.values = mx.zeros((1, H, width, D))
    cache.keys[..., :n, :] = mx.array(rng.standard_normal((1, H, n, D)).astype(np.float32))
    cache.values[..., :n, :] = mx.array(rng.standard_normal((1, H, n, D)).astype(np.float32))
    cache.offset = n
    mx.eval(cache.keys, cache.values)
    return cache


def _tail(n: int, seed: int) -> tuple[mx.array, mx.array]:
    rng = np.random.default_rng(seed)
    return (mx.array(rng.standard_normal((1, H, n, D)).astype(np.float32)),
            mx.array(rng.standard_normal((1, H, n, D)).astype(np.float32)))


def test_extend_writes_the_new_positions_into_the_prompt_entry():
    prefix = PrefixCache()
    prompt = list(range(10))
    layers = [_filled(10, 20, seed) for seed in (1, 2)]
    assert prefix.insert(prompt, alias(layers), compact=False)
    del layers  # the prompt's sequence went on as a batch row: nobody else holds it
    tails = [_tail(5, seed) for seed in (3, 4)]
    before = [(mx.array(e.keys[..., :10, :]), mx.array(e.values[..., :10, :]))
              for e in prefix.entries[0].cache]
    written = prefix.extend(prompt + [20, 21, 22, 23, 24],
                            lambda i, a, b: (tails[i][0][..., a - 10:b - 10, :],
                                             tails[i][1][..., a - 10:b - 10, :]))
    assert written
    mx.eval(written)
    [entry] = prefix.entries  # the prompt's entry is subsumed by the longer one
    assert entry.tokens.tolist() == prompt + [20, 21, 22, 23, 24]
    for layer, (keys, values), (tk, tv) in zip(entry.cache, before, tails, strict=True):
        assert layer.offset == 15 and layer.keys.shape[2] == 20  # the same buffer's size
        assert mx.array_equal(layer.keys[..., :15, :], mx.concatenate([keys, tk], axis=2))
        assert mx.array_equal(layer.values[..., :15, :], mx.concatenate([values, tv], axis=2))
    assert prefix.nbytes == entry.nbytes
    # every position already held: nothing to write
    assert prefix.extend(prompt + [20, 21], lambda i, a, b: pytest.fail("read")) == []


def test_extend_writes_in_place_when_nothing_else_holds_the_buffer():
    prefix = PrefixCache()
    big = 1 << 14  # 1 MiB a layer's keys
    layers = [_filled(big - 100, big, 5)]
    prefix.insert(list(range(big - 100)), alias(layers), compact=False)
    del layers
    tail = _tail(4, 6)
    mx.synchronize()
    before = mx.get_active_memory()
    written = prefix.extend(list(range(big - 96)), lambda i, a, b: tail)
    mx.eval(written)
    del written
    # a copy would allocate the buffers again (2 MiB); in place, nothing
    assert mx.get_active_memory() - before < (1 << 20)


def test_a_holder_of_the_old_entry_sees_no_change():
    prefix = PrefixCache()
    prompt = list(range(10))
    layers = [_filled(10, 20, 7)]
    prefix.insert(prompt, alias(layers), compact=False)
    # a request restored the prompt, and the prompt's own sequence still decodes alone
    restored, n = prefix.restore(prompt + [99])
    assert n == 10
    old = mx.array(layers[0].keys[..., 10:14, :])
    prefix.extend(prompt + [1, 2, 3, 4], lambda i, a, b: _tail(4, 8))
    mx.eval(prefix.entries[0].cache[0].keys)
    assert mx.array_equal(layers[0].keys[..., 10:14, :], old)  # the live cache unchanged
    assert restored[0].keys.shape[2] == 10
    assert mx.array_equal(prefix.entries[0].cache[0].keys[..., 10:14, :], _tail(4, 8)[0])


def test_extend_declines_what_it_cannot_hold():
    prefix = PrefixCache()
    prefix.insert(list(range(10)), [_filled(10, 12, 9)], compact=False)  # 2 spare columns
    read = lambda i, a, b: _tail(b - a, 10)  # noqa: E731
    assert prefix.extend(list(range(20)), read) is None  # no room: copied whole instead
    assert prefix.extend([5] * 12, read) is None  # no entry holds a prefix of it
    assert prefix.extend(list(range(12)), read)  # fits in the spare columns
    wide = PrefixCache()
    wide.insert(list(range(10)), [_filled(10, 256, 9)], compact=False)
    assert wide.extend(list(range(15)), read) is None  # would keep 241 unused: copied exact
    assert PrefixCache(whole_entries=True).extend(list(range(3)), read) is None


def test_rows_leaving_a_batch_are_kept_without_copying_them_out(tiny, make_engine,
                                                                monkeypatch):
    """Rows finish one after another while others decode: each finished row's KV goes into
    its prompt's entry (SlotKVCache.extract is never called for it), and a next turn on
    each reply reuses all of it and gives mlx-lm's own tokens."""
    extracted: list[bool] = []  # each row cut out of the batch: whether with room to decode
    real = kv.extract

    def spy(batch, row, room=False):
        extracted.append(room)
        return real(batch, row, room)

    monkeypatch.setattr(kv, "extract", spy)
    engine = make_engine(max_concurrent=4)
    starts = prompts(4, seed=41)
    lengths = [3, 5, 7, 20]
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n))
               for p, n in zip(starts, lengths, strict=True)]
    run_to_end(engine)
    # one row was cut out: the one left alone, back to its own cache (with room to
    # decode); the three that finished in the batch were not
    assert extracted == [True]
    for prompt, stream, n in zip(starts, streams, lengths, strict=True):
        assert stream.tokens == reference_tokens(tiny.model, prompt, n)
        turn = prompt + stream.tokens + [65, 66]
        again = engine.submit(prompt_tokens=turn, params=SamplingParams(max_tokens=6))
        run_to_end(engine)
        assert again.stats.cached_tokens == len(prompt) + n - 1
        assert again.tokens == reference_tokens(tiny.model, turn, 6)


def test_kept_rows_hold_few_unused_positions(make_engine):
    """Rows kept in their prompts' buffers leave the prefix budget for tokens: each entry
    keeps at most an eighth (or 16) of its positions unused (spare_allowed). Prompts'
    buffers grown 256 positions at a time, kept as they were, held 36 entries in the soak's
    budget where exact copies held 47."""
    engine = make_engine(max_concurrent=8)
    for prompt in prompts(6, seed=43):
        engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=10))
    run_to_end(engine)
    stats = engine.stats()
    assert stats.prefix_entries == 6
    per_token, tokens = stats.kv_bytes_per_token, stats.prefix_cached_tokens
    assert stats.prefix_cached_bytes <= per_token * (tokens + tokens // 8 + 16 * 6)
