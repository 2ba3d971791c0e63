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


def test_a_fixed_state_is_in_every_running_requests_need() -> None:
    policy = KvPolicy(budget=100 * 400, per_token=100, context_length=1000, prefix=None,
                      per_sequence=5_000)
    assert policy.need(10, 20) == 100 * (30 + KVCache.step) + 5_000
    # what max_tokens would fit is told with the state taken off the budget
    assert "max_tokens to at most 44," in policy.refusal(50, 500)
    assert "recurrent state" in policy.refusal(50, 500)


def _tiny_qwen35(tmp_path):
    from engine.loader import load_model
    from tests.gguf_models import CASES, build_model, gguf_tensors, write_gguf

    case = CASES["qwen35"]
    path = write_gguf(tmp_path / "qwen35.gguf", case, gguf_tensors(case, build_model(case)))
    return path, load_model(str(path))


def test_a_hybrid_models_recurrent_state_keeps_it_from_being_admitted_past_the_budget(
        tmp_path, native_built) -> None:
    """Qwen 3.5: a budget that holds 3 requests' KV holds only 2 once each one's recurrent
    state (a fixed size a sequence, the library's recurrent_state_bytes) is counted."""
    from app.models.gguf_header import read_gguf_header
    from app.models.inspect import recurrent_state_bytes
    from engine import kv_memory
    from tests.engine.conftest import engine_on, run_to_end

    path, tiny = _tiny_qwen35(tmp_path)
    state = kv_memory.state_bytes(tiny.model)
    assert state == recurrent_state_bytes(read_gguf_header(path)) > 0
    prompt, max_tokens = 8, 12
    kv_alone = kv_memory.bytes_per_token(tiny.model) * (prompt + max_tokens + KVCache.step)
    assert state < kv_alone  # so two requests with their states fit where three KVs do

    def admitted(budget: int) -> tuple[int, int]:
        engine = engine_on(tiny, kv_budget_bytes=budget)
        streams = [engine.submit(prompt_tokens=[5 + i] * prompt,
                                 params={"max_tokens": max_tokens}) for i in range(3)]
        engine.step()
        s = engine.stats()
        assert s.kv_state_bytes_per_sequence == state
        assert s.kv_reserved_bytes == s.active * (kv_alone + state) <= budget
        run_to_end(engine)  # the one that waited runs once a share is free
        assert all(st.finish_reason == "length" for st in streams)
        return s.active, s.queued

    assert admitted(3 * kv_alone + state) == (2, 1)
    assert admitted(3 * (kv_alone + state)) == (3, 0)
