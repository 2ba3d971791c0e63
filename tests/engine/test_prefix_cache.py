"""Conversation memory: a reused prefix gives exactly the tokens computed from scratch."""

import pytest

from engine import RequestRejected, SamplingParams
from tests.engine.conftest import prompts, reference_tokens, run_to_end

N = 12


def greedy(n: int = N) -> SamplingParams:
    return SamplingParams(max_tokens=n)


def finish(engine, prompt: list[int], n: int = N):
    stream = engine.submit(prompt_tokens=prompt, params=greedy(n))
    run_to_end(engine)
    return stream


def test_next_turn_reuses_the_whole_previous_turn(tiny, make_engine):
    engine = make_engine()
    turn1 = prompts(1, seed=31)[0] + [7] * 30
    first = finish(engine, turn1)
    assert first.stats.cached_tokens == 0
    turn2 = turn1 + first.tokens + [65, 66, 67]
    second = finish(engine, turn2)
    # Everything the model saw last turn is reused: the prompt and all but the last
    # generated token (sampled, never fed).
    assert second.stats.cached_tokens == len(turn1) + N - 1
    assert second.tokens == reference_tokens(tiny.model, turn2, N)


def test_regenerate_reuses_all_but_the_last_prompt_token(tiny, make_engine):
    engine = make_engine()
    prompt = prompts(4, seed=32)[3]
    a = finish(engine, prompt)
    b = finish(engine, prompt)
    assert b.stats.cached_tokens == len(prompt) - 1
    assert a.tokens == b.tokens == reference_tokens(tiny.model, prompt, N)


def test_edit_at_turn_two_of_four_reuses_up_to_the_edit(tiny, make_engine):
    engine = make_engine()
    users = [[10 + i] * 9 for i in range(4)]
    history: list[int] = []
    starts = []
    for user in users:
        starts.append(len(history))
        history = history + user
        history += finish(engine, history).tokens
    edited = history[: starts[1]] + [99] * 9  # turn 2's user message changed
    again = finish(engine, edited)
    assert again.stats.cached_tokens == starts[1]
    assert again.tokens == reference_tokens(tiny.model, edited, N)


def test_two_requests_share_a_system_prompt_and_decode_in_one_batch(tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    system = [5] * 40
    finish(engine, system + [1, 2, 3])  # an earlier chat with the same system prompt
    a_prompt, b_prompt = system + [8, 9], system + [200, 201, 202, 203]
    a = engine.submit(prompt_tokens=a_prompt, params=greedy())
    b = engine.submit(prompt_tokens=b_prompt, params=greedy())
    run_to_end(engine)
    assert a.stats.cached_tokens == b.stats.cached_tokens == len(system)
    assert max(t.decode_rows for t in engine.telemetry()[-N:]) == 2
    assert a.tokens == reference_tokens(tiny.model, a_prompt, N)
    assert b.tokens == reference_tokens(tiny.model, b_prompt, N)


def test_a_prefix_is_reused_while_the_request_that_made_it_still_decodes(tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    long_prompt = prompts(4, seed=33)[3] + [3] * 20
    first = engine.submit(prompt_tokens=long_prompt, params=greedy(30))
    while len(first.tokens) < 3:
        engine.step()
    follower = long_prompt[:50] + [77, 78]
    second = engine.submit(prompt_tokens=follower, params=greedy())
    run_to_end(engine)
    assert second.stats.cached_tokens == 50
    assert first.tokens == reference_tokens(tiny.model, long_prompt, 30)
    assert second.tokens == reference_tokens(tiny.model, follower, N)


def test_reusing_a_prefix_never_changes_it_for_the_next_user(tiny, make_engine):
    engine = make_engine()
    base = prompts(4, seed=34)[3]
    finish(engine, base + [1] * 10)
    # Two requests that diverge inside the cached entry, each writing over the positions
    # that follow the shared part in its own cache.
    for tail in ([2] * 10, [3] * 10, [1] * 10):
        prompt = base + tail
        assert finish(engine, prompt).tokens == reference_tokens(tiny.model, prompt, N)


def test_a_cancelled_reply_keeps_what_it_computed(tiny, make_engine):
    engine = make_engine()
    prompt = prompts(4, seed=35)[3]
    stream = engine.submit(prompt_tokens=prompt, params=greedy(30))
    while len(stream.tokens) < 5:
        engine.step()
    stream.cancel()
    run_to_end(engine)
    assert stream.finish_reason == "cancelled"
    again = finish(engine, prompt + stream.tokens + [4])
    assert again.stats.cached_tokens >= len(prompt) + len(stream.tokens) - 1
    assert again.tokens == reference_tokens(tiny.model, prompt + stream.tokens + [4], N)


def test_an_evicted_prefix_is_recomputed_exactly(tiny, make_engine):
    # Room for one running request and hardly anything else: each new request evicts.
    per_token = make_engine().stats().kv_bytes_per_token
    engine = make_engine(kv_budget_bytes=per_token * (100 + 256))
    turn1 = prompts(4, seed=36)[3]
    first = finish(engine, turn1)
    finish(engine, [9] * 60)  # someone else's request needs the memory
    stats = engine.stats()
    assert stats.prefix_evictions >= 1
    turn2 = turn1 + first.tokens + [50]
    second = finish(engine, turn2)
    assert second.stats.cached_tokens == 0
    assert second.tokens == reference_tokens(tiny.model, turn2, N)


def test_a_tiny_budget_queues_requests_and_all_finish_exactly(tiny, make_engine):
    per_token = make_engine().stats().kv_bytes_per_token
    engine = make_engine(max_concurrent=8, kv_budget_bytes=per_token * (2 * 256 + 130))
    batch = prompts(8, seed=37)
    streams = [engine.submit(prompt_tokens=p, params=greedy()) for p in batch]
    peak = 0
    while engine.has_work():
        engine.step()
        stats = engine.stats()
        peak = max(peak, stats.active)
        assert stats.kv_reserved_bytes <= stats.kv_budget_bytes
        assert stats.kv_reserved_bytes + stats.prefix_cached_bytes <= stats.kv_budget_bytes
    assert 1 < peak < 8  # the budget, not max_concurrent, limited how many ran at once
    for p, s in zip(batch, streams, strict=True):
        assert s.finish_reason == "length"
        assert s.tokens == reference_tokens(tiny.model, p, N)


def test_a_request_that_can_never_fit_is_refused_at_submit(make_engine):
    per_token = make_engine().stats().kv_bytes_per_token
    engine = make_engine(kv_budget_bytes=per_token * (50 + 256))
    with pytest.raises(RequestRejected, match="KV"):
        engine.submit(prompt_tokens=[1] * 30, params=greedy(40))
    assert finish(engine, [1] * 30, 10).finish_reason == "length"  # a smaller one fits


def test_prefix_figures_in_engine_stats(make_engine):
    engine = make_engine()
    prompt = prompts(4, seed=38)[3]
    finish(engine, prompt)
    finish(engine, prompt)
    stats = engine.stats()
    assert stats.prefix_hit_tokens == len(prompt) - 1
    assert stats.prefix_lookup_tokens == 2 * len(prompt)
    assert stats.prefix_hit_rate == pytest.approx((len(prompt) - 1) / (2 * len(prompt)))
    assert stats.prefix_cached_tokens == len(prompt) + N - 1
    assert stats.prefix_cached_bytes > 0
    assert engine.finished_requests()[-1].cached_tokens == len(prompt) - 1


def test_prefix_cache_can_be_turned_off(tiny, make_engine):
    engine = make_engine(prefix_cache=False)
    prompt = prompts(4, seed=39)[3]
    finish(engine, prompt)
    again = finish(engine, prompt)
    assert again.stats.cached_tokens == 0
    assert again.tokens == reference_tokens(tiny.model, prompt, N)
