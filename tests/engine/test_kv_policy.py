"""engine.kv_policy: running requests' KV plus cached prefixes stay within one budget."""

from __future__ import annotations

import mlx.core as mx
from mlx_lm.models.cache import KVCache

from engine import SamplingParams
from engine.kv_policy import KvPolicy
from engine.prefix_cache import PrefixCache
from engine.sequence import Priority, Sequence


def waiting(prompt: int, max_tokens: int) -> Sequence:
    return Sequence(request_id=f"r{prompt}", prompt_tokens=list(range(prompt)),
                    params=SamplingParams(max_tokens=max_tokens),
                    priority=Priority.INTERACTIVE, text=None, seed=0, sampler=None,
                    t_submit=0.0)


def cached(tokens: int) -> list[KVCache]:
    c = KVCache()
    c.update_and_fetch(mx.zeros((1, 2, tokens, 8)), mx.zeros((1, 2, tokens, 8)))
    return [c]


def test_need_counts_the_longest_sequence_and_one_allocation_step() -> None:
    policy = KvPolicy(budget=10**9, per_token=100, context_length=1000, prefix=None)
    assert policy.need(10, 20) == 100 * (30 + KVCache.step)
    assert policy.need(900, 500) == 100 * (1000 + KVCache.step)  # at most the context


def test_reserve_until_full_release_frees_and_prefixes_give_way() -> None:
    prefix = PrefixCache()
    per_token = 2 * 2 * 8 * 4  # keys and values, 2 heads of 8 floats
    need = per_token * (10 + KVCache.step)
    policy = KvPolicy(budget=2 * need + 50, per_token=per_token, context_length=4096,
                      prefix=prefix)
    a, b, c = waiting(5, 5), waiting(5, 5), waiting(5, 5)
    assert policy.reserve(a) and policy.reserve(b) and not policy.reserve(c)
    assert policy.reserved == 2 * need and a.kv_reserved == need
    prefix.insert(list(range(40)), cached(40))
    assert prefix.nbytes > 50
    policy.evict()  # running requests first: the prefix does not fit beside them
    assert prefix.nbytes == 0
    policy.release(a)
    assert policy.reserved == need and policy.reserve(c)


def finished(prompt: int, output: list[int], reason: str) -> Sequence:
    seq = waiting(prompt, len(output))
    seq.output_tokens = list(output)
    seq.finish_reason = reason
    return seq


def test_finished_kv_is_kept_when_worth_it_and_restored_within_the_budget() -> None:
    per_token = 2 * 2 * 8 * 4
    prefix = PrefixCache()
    policy = KvPolicy(budget=per_token * 50, per_token=per_token, context_length=4096,
                      prefix=prefix)
    policy.keep_finished(finished(20, [7] * 10, "error"), cached(30))  # may be half-written
    assert prefix.entries == []
    done = finished(20, [7] * 10, "length")
    policy.keep_finished(done, cached(30))
    assert [e.num_tokens for e in prefix.entries] == [30]
    other = finished(25, [9] * 5, "stop")
    policy.keep_finished(other, cached(30))  # two entries do not fit: the older one goes
    assert [e.tokens.tolist() for e in prefix.entries] == [list(range(25)) + [9] * 5]
    turn = waiting(0, 5)
    turn.prompt_tokens = list(range(25)) + [9] * 5 + [1, 2]
    fresh = waiting(3, 5)
    fresh.prompt_tokens = [90, 91, 92]  # shares no prefix with the entry
    policy.start([turn, fresh], new_cache=lambda: [KVCache()])
    assert (turn.num_cached, turn.cached_tokens, turn.cache[0].offset) == (30, 30, 30)
    assert (fresh.num_cached, fresh.cache[0].offset) == (0, 0)
