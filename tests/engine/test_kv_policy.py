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
