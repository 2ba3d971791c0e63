"""engine.kv_memory: the default KV budget follows the machine and the model (issue #28)."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import KVCache

from engine import EngineConfig, kv_memory, testing
from engine.config import KV_BUDGET_ENV, kv_budget_from_env
from engine.kv_memory import MIN_DEFAULT_BUDGET, formula
from engine.slot_cache import SlotKVCache

KiB, MiB, GiB = 2**10, 2**20, 2**30
BUNDLED_PER_TOKEN = 46_080  # SmolLM2-135M: 30 layers x 3 KV heads x 64 x float32 x (K, V)


def test_the_bundled_model_gets_a_chat_turn_a_slot_plus_one_long_request() -> None:
    # 16 slots x 512 + 8,192 tokens (720 MiB); 22 GiB available does not bound it. The old
    # default was a quarter of the machine: 6 GiB on 24 GB, whatever the model.
    budget, prefixes = formula(BUNDLED_PER_TOKEN, 8192, 16, available=22 * GiB)
    assert budget == prefixes == BUNDLED_PER_TOKEN * (16 * 512 + 8192) == 720 * MiB
    assert budget < 24 * GiB // 4 / 8
    assert formula(BUNDLED_PER_TOKEN, 8192, 4, 22 * GiB)[0] == BUNDLED_PER_TOKEN * 10240


def test_a_7b_model_on_a_16gb_laptop_is_bounded_by_a_quarter_of_what_is_free() -> None:
    # Mistral-7B: 32 layers x 8 KV heads x 128 x float16 x 2 = 128 KiB a token, 32k context;
    # 6 GiB free once its 4-bit weights are in: 1.5 GiB, not the 4 GiB a full context takes.
    assert formula(128 * KiB, 32768, 16, available=6 * GiB) == (6 * GiB // 4, 6 * GiB // 4)


def test_a_long_context_gets_room_for_one_whole_sequence_but_prefixes_keep_less() -> None:
    # Llama-3.2-1B: 32 KiB a token, 128k context. An API request without max_tokens sets
    # aside the whole context: it must fit, or it is refused; the cache keeps only 512 MiB.
    budget, prefixes = formula(32 * KiB, 131072, 16, available=64 * GiB)
    assert budget == 32 * KiB * (131072 + 256)
    assert prefixes == 32 * KiB * (16 * 512 + 8192) == 512 * MiB


def test_short_contexts_ask_only_for_what_a_sequence_can_hold_and_never_below_the_floor() -> None:
    per_token = 64 * KiB
    assert formula(per_token, 300, 16, 64 * GiB) == (per_token * 17 * 300,) * 2
    assert formula(256, 512, 16, 64 * GiB) == (MIN_DEFAULT_BUDGET,) * 2  # a tiny model
    assert formula(per_token, 8192, 16, available=100 * MiB) == (MIN_DEFAULT_BUDGET,) * 2


def test_available_memory_is_positive_and_at_most_physical_ram() -> None:
    import os

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 0 < kv_memory.host_available_bytes() <= physical


def test_the_engine_uses_the_formula_and_says_so(make_engine, monkeypatch) -> None:
    monkeypatch.delenv(KV_BUDGET_ENV, raising=False)
    monkeypatch.setattr(kv_memory, "available_memory", lambda weights: (64 * GiB, "RAM"))
    monkeypatch.setattr(kv_memory, "bytes_per_token", lambda model: 64 * KiB)  # a bigger model
    engine = make_engine(context_length=4096)
    s = engine.stats()
    assert s.kv_bytes_per_token == 64 * KiB
    assert (s.kv_budget_bytes, s.kv_prefix_budget_bytes) == formula(64 * KiB, 4096, 16,
                                                                    64 * GiB)
    assert s.kv_budget_bytes == 64 * KiB * (16 * 512 + 4096) > MIN_DEFAULT_BUDGET
    assert s.kv_budget_basis == "default: 16 slots x 512 + 4096 tokens, x 64 KiB a token"


def test_the_memory_bound_shows_in_the_basis(make_engine, monkeypatch) -> None:
    monkeypatch.delenv(KV_BUDGET_ENV, raising=False)
    monkeypatch.setattr(kv_memory, "available_memory",
                        lambda weights: (4 * 300 * MiB, "available RAM"))
    monkeypatch.setattr(kv_memory, "bytes_per_token", lambda model: 64 * KiB)
    s = make_engine(context_length=8192).stats()  # would ask for 64 KiB x 16,384 = 1 GiB
    assert s.kv_budget_bytes == s.kv_prefix_budget_bytes == 300 * MiB
    assert s.kv_budget_basis == "default: 1/4 of 1.2 GiB available RAM"


def test_cached_prefixes_are_held_to_their_part(make_engine, monkeypatch) -> None:
    """Prefixes beyond the prefix part are evicted even with the budget free."""
    monkeypatch.delenv(KV_BUDGET_ENV, raising=False)
    engine = make_engine()
    policy = testing.internals(engine).kv
    prompt = [5, 6, 7, 8, 9, 10, 11, 12]
    for i in range(6):
        engine.submit(prompt_tokens=[i + 1, *prompt], params={"max_tokens": 4})
    while engine.has_work():
        engine.step()
    held = engine.stats().prefix_cached_bytes
    assert engine.stats().prefix_entries >= 4 and held > 0
    policy.prefix_budget = held // 2  # as a long context's default would leave it
    policy.evict()
    s = engine.stats()
    assert 0 < s.prefix_cached_bytes <= held // 2 and s.prefix_evictions >= 1
    assert s.kv_budget_bytes - s.kv_reserved_bytes > held  # the whole budget was free


def test_an_override_wins_from_the_config_or_the_environment(make_engine, monkeypatch) -> None:
    monkeypatch.delenv(KV_BUDGET_ENV, raising=False)
    s = make_engine(kv_budget_bytes=3 * MiB).stats()
    assert s.kv_budget_bytes == s.kv_prefix_budget_bytes == 3 * MiB
    assert s.kv_budget_basis.startswith("set:")
    monkeypatch.setenv(KV_BUDGET_ENV, "1.5")
    assert EngineConfig().kv_budget_bytes == int(1.5 * MiB)
    assert make_engine().stats().kv_budget_bytes == int(1.5 * MiB)


@pytest.mark.parametrize("value", ["lots", "0", "-5", "nan", "inf", "1e-9"])
def test_a_bad_budget_variable_is_refused_naming_it(value) -> None:
    with pytest.raises(ValueError, match=f"{KV_BUDGET_ENV}='{value}'"):
        kv_budget_from_env({KV_BUDGET_ENV: value})
    assert kv_budget_from_env({KV_BUDGET_ENV: " "}) is None
    assert kv_budget_from_env({}) is None
    assert kv_budget_from_env({KV_BUDGET_ENV: "512"}) == 512 * MiB


def test_the_default_budget_adds_a_hybrid_models_states_a_slot(tmp_path, monkeypatch) -> None:
    """Qwen 3.5: the formula's KV figure (from the memory less the states) plus
    max_concurrent recurrent states, as the model library counts what it needs."""
    from engine.loader import load_model
    from tests.engine.conftest import engine_on
    from tests.gguf_models import CASES, build_model, gguf_tensors, write_gguf

    monkeypatch.delenv(KV_BUDGET_ENV, raising=False)
    monkeypatch.setattr(kv_memory, "available_memory", lambda weights: (4 * GiB, "RAM"))
    case = CASES["qwen35"]
    tiny = load_model(str(write_gguf(tmp_path / "q.gguf", case,
                                     gguf_tensors(case, build_model(case)))))
    state, per_token = kv_memory.state_bytes(tiny.model), kv_memory.bytes_per_token(tiny.model)
    s = engine_on(tiny, max_concurrent=4).stats()
    kv, prefixes = formula(per_token, tiny.context_length, 4, 4 * GiB - 4 * state)
    assert (s.kv_budget_bytes, s.kv_prefix_budget_bytes) == (kv + 4 * state, prefixes)
    assert "+ 4 recurrent states x" in s.kv_budget_basis


def test_the_kv_in_use_counts_what_a_batch_buffer_holds_beyond_its_rows_set_asides(
        make_engine) -> None:
    """A batch buffer is as wide as its longest row and rounded up in rows, so one long row
    among short ones holds far more than their set-asides. The KV in use (the stats panel's
    line, /metrics) counts what the buffer holds, not only the set-asides (issue #46 item
    14: the panel said the KV was within its budget while the process went over its bound).
    Checked after every tick."""
    per_token = make_engine().stats().kv_bytes_per_token
    budget = per_token * 5000
    engine = make_engine(max_concurrent=8, kv_budget_bytes=budget)
    for i in range(10):  # the prefix cache fills: 10 entries of ~300 tokens, one at a time
        engine.submit(prompt_tokens=[1 + i] + [(7 * i + j) % 200 + 3 for j in range(299)],
                      params={"max_tokens": 4})
        while engine.has_work():
            engine.step()
    assert engine.stats().prefix_cached_bytes > per_token * 2500
    # one long row and five short ones, none of them a cached prompt
    engine.submit(prompt_tokens=[250] + [(11 * j) % 200 + 3 for j in range(299)],
                  params={"max_tokens": 40})
    for i in range(5):
        engine.submit(prompt_tokens=[240 + i, 5, 6, 7, 8, 9, 10, 11], params={"max_tokens": 40})
    over = 0
    while engine.has_work():
        engine.step()
        f, s = testing.facts(engine), engine.stats()
        assert s.kv_used_bytes >= s.prefix_cached_bytes + f.batch_kv_bytes
        assert s.kv_running_bytes >= s.kv_reserved_bytes
        over = max(over, f.batch_kv_bytes - s.kv_reserved_bytes)
    assert over > 0  # the case arose: the buffer held more than every set-aside


def test_batch_buffers_make_spare_rows_only_within_the_budgets_free_room(make_engine) -> None:
    """Rows are made 8 at a time and a buffer was cut only once over half empty, so 4 rows
    that fill the KV budget held a buffer of 8: twice their set-asides, beyond the budget
    (issue #46 item 14: the window's round 8 held 630 MiB of buffers for 3 rows that set
    aside 257). Spare rows are now made, and kept, only within the budget's free room, so
    the KV in memory stays within the budget after every tick."""
    per_token = make_engine().stats().kv_bytes_per_token
    # 4 requests of 300 + 40 tokens set aside (340 + 256) tokens each: 2,384 of 2,600
    budget = per_token * 2600
    engine = make_engine(max_concurrent=8, kv_budget_bytes=budget)
    for i in range(4):
        engine.submit(prompt_tokens=[1 + i] + [(7 * i + j) % 200 + 3 for j in range(299)],
                      params={"max_tokens": 40})
    rows_made = 0
    while engine.has_work():
        engine.step()
        f, s = testing.facts(engine), engine.stats()
        assert s.kv_used_bytes <= budget, (s.kv_used_bytes, budget)
        batch = testing.internals(engine).batch
        if batch.cache is not None:
            rows_made = max(rows_made, batch.cache[0].keys.shape[0])
            assert f.batch_kv_bytes <= s.kv_reserved_bytes
    assert rows_made == 4


def test_a_buffer_holding_more_than_the_free_room_beyond_its_rows_is_cut_at_a_leave(
        ) -> None:
    """Under half empty but over the free room: cut to its rows when rows leave."""
    def solo(length: int) -> KVCache:
        c = KVCache()
        c.update_and_fetch(mx.random.normal((1, 4, length, 64)),
                           mx.random.normal((1, 4, length, 64)))
        return c

    layer = SlotKVCache([solo(1000 - 10 * i) for i in range(6)], rows=8)
    assert layer.keys.shape[0] == 8  # no limit: rows rounded up to 8
    layer.keep([0, 1, 2, 3, 4])
    assert not layer.shrink()  # 5 of 8 rows: under half empty, as before
    rows = [tuple(mx.array(a) for a in layer.row_kv(i)) for i in range(5)]
    layer.slack_bytes = 0
    assert layer.shrink() and layer.keys.shape[0] == 5
    for i, (keys, values) in enumerate(rows):  # each row's KV as it was
        k, v = layer.row_kv(i)
        assert mx.array_equal(k, keys).item() and mx.array_equal(v, values).item()
    limited = SlotKVCache([solo(1000) for _ in range(3)], rows=8, slack_bytes=0)
    assert limited.keys.shape[0] == 3


def test_cached_prefixes_give_way_to_a_batch_buffers_padding(make_engine) -> None:
    """Rows are as wide as the longest one, so three short rows beside a long one hold far
    more than their set-asides. The budget takes that padding from its room: cached
    prefixes give way to it and the KV in memory stays within the budget after every tick
    (issue #46 item 14: the soak's KV in use read 791 of 720 MiB, the padding uncounted)."""
    per_token = make_engine().stats().kv_bytes_per_token
    budget = per_token * 7000
    engine = make_engine(max_concurrent=8, kv_budget_bytes=budget, context_length=2048)
    for i in range(4):  # cached prefixes fill what the requests below leave free
        engine.submit(prompt_tokens=[1 + i] + [(7 * i + j) % 200 + 3 for j in range(999)],
                      params={"max_tokens": 4})
        while engine.has_work():
            engine.step()
    assert engine.stats().prefix_cached_bytes > per_token * 3000
    # one long row (1,500 + 20 + 256 set aside) and three short ones (40 + 20 + 256 each)
    engine.submit(prompt_tokens=[250] + [(11 * j) % 200 + 3 for j in range(1499)],
                  params={"max_tokens": 20})
    for i in range(3):
        engine.submit(prompt_tokens=[240 + i] + [5 + j for j in range(39)],
                      params={"max_tokens": 20})
    padding = 0
    while engine.has_work():
        engine.step()
        f, s = testing.facts(engine), engine.stats()
        padding = max(padding, f.batch_kv_bytes - s.kv_reserved_bytes)
        assert s.prefix_cached_bytes + max(f.batch_kv_bytes, s.kv_reserved_bytes) <= budget, (
            s.prefix_cached_bytes, f.batch_kv_bytes, s.kv_reserved_bytes, budget)
    assert padding > per_token * 2000  # the case arose: the buffer held far more


def test_a_row_joining_a_full_buffer_grows_it_a_layer_at_a_time() -> None:
    """A join that grows the buffers copies every row into new ones. Each layer's copy is
    evaluated before the next layer's, so the old buffers go one at a time: left to the
    next pass, old and new buffers of many layers were live together (issue #46 item 14).
    MLX's rise over what was live is the buffers' growth plus about a layer, and each
    row's KV is as it was."""
    from engine import cache as kv

    layers = 8

    def solo(length: int, seed: int) -> list[KVCache]:
        return _solo_cache(length, seed, layers)

    batch = kv.start_batch([solo(2000 + 10 * i, i) for i in range(3)], 3, room=0)
    mx.eval([c.keys for c in batch] + [c.values for c in batch])
    before = [tuple(np.array(a) for a in layer.row_kv(r)) for layer in batch for r in range(3)]
    joining = solo(1990, 9)
    old = sum(layer.nbytes for layer in batch)
    live = mx.get_active_memory()
    mx.reset_peak_memory()
    kv.add_rows(batch, [joining], 4)
    mx.eval([c.keys for c in batch] + [c.values for c in batch])
    grown = sum(layer.nbytes for layer in batch)
    assert grown > old  # the case arose: the join grew the buffers
    rise = mx.get_peak_memory() - live
    assert rise <= grown - old + 2 * grown // layers, (rise, grown - old, grown // layers)
    after = [tuple(np.array(a) for a in layer.row_kv(r)) for layer in batch for r in range(3)]
    for (k0, v0), (k1, v1) in zip(before, after, strict=True):
        assert np.array_equal(k0, k1) and np.array_equal(v0, v1)
    k, v = batch[5].row_kv(3)
    assert mx.array_equal(k, joining[5].keys[..., :1990, :]).item()
    assert mx.array_equal(v, joining[5].values[..., :1990, :]).item()


def test_a_request_waits_for_the_row_made_ahead_for_a_prompt_still_prefilling(
        make_engine) -> None:
    """Rows joining a batch make a row ahead for a prompt still prefilling (within the
    budget's free room), so it does not copy every row again when it joins. A request
    admitted into that room would hold its KV beside that empty row and the prompt's own
    KV: the window's highest peaks (issue #46 item 14). It now waits until the prompt has
    joined and filled its row, then runs."""
    per_token = make_engine().stats().kv_bytes_per_token
    # set aside: A and B 20 + 200 + 256 tokens each, C 400 + 20 + 256, D 20 + 60 + 256;
    # C's row made ahead: 256 columns. D fits beside A, B and C, not beside C's row too.
    budget = per_token * (2 * 476 + 676 + 336 + 200)
    engine = make_engine(max_concurrent=8, kv_budget_bytes=budget, context_length=2048,
                         max_token_budget=64, whole_prompt_tokens=0, prefix_cache=False)
    for i in range(2):
        engine.submit(prompt_tokens=[10 + i] + [3 + j for j in range(19)],
                      params={"max_tokens": 200})
    engine.submit(prompt_tokens=[30] + [(5 * j) % 200 + 3 for j in range(399)],
                  params={"max_tokens": 20})
    for _ in range(40):  # until A and B decode in a buffer with a row made for C
        engine.step()
        batch = testing.internals(engine).batch
        if batch.cache is not None and batch.cache[0].keys.shape[0] == 3:
            break
    assert len(testing.facts(engine).decode_rows) == 2 and engine.stats().prefilling == 1
    engine.submit(prompt_tokens=[40] + [3 + j for j in range(19)], params={"max_tokens": 60})
    waited = 0
    while engine.stats().prefilling == 1:  # C prefills: D waits
        engine.step()
        s = engine.stats()
        if s.prefilling == 1:
            assert s.queued == 1, "admitted into the room of the row made for C"
            waited += 1
    assert waited >= 2
    while engine.has_work():  # C joined: D is admitted and runs to its end
        engine.step()
    assert engine.stats().completed == 4


def test_a_row_made_ahead_is_cut_when_the_budget_loses_its_room(make_engine,
                                                                 monkeypatch) -> None:
    """The row made ahead for a prompt still prefilling fit the budget's free room when it
    was made; once that room is gone (cached prefixes kept since; here the budget is
    lowered), the buffers are cut to their rows at the tick's end, and every reply is the
    one the engine gives without the cut."""
    from engine import slot_cache

    monkeypatch.setattr(slot_cache, "SHRINK_MIN_BYTES", 0)  # the tiny buffers are cut too
    per_token = make_engine().stats().kv_bytes_per_token
    budget = per_token * (2 * 476 + 676 + 336 + 200)

    def run(cut: bool) -> dict[str, list[int]]:
        engine = make_engine(max_concurrent=8, kv_budget_bytes=budget, context_length=2048,
                             max_token_budget=64, whole_prompt_tokens=0, prefix_cache=False)
        for i in range(2):
            engine.submit(prompt_tokens=[10 + i] + [3 + j for j in range(19)],
                          params={"max_tokens": 60}, request_id=f"row{i}")
        engine.submit(prompt_tokens=[30] + [(5 * j) % 200 + 3 for j in range(399)],
                      params={"max_tokens": 20}, request_id="prefilling")
        out: dict[str, list[int]] = {"row0": [], "row1": [], "prefilling": []}
        batch, memory = testing.internals(engine).batch, testing.internals(engine).kv
        rows_after_cut = None
        while engine.has_work():
            for event in engine.step():
                if event.token is not None:
                    out[event.request_id].append(event.token)
            if cut and rows_after_cut is None and batch.cache is not None and (
                    batch.cache[0].keys.shape[0] == 3 and engine.stats().prefilling):
                memory.budget = memory.reserved + per_token * 64  # the row's room is gone
                for event in engine.step():
                    if event.token is not None:
                        out[event.request_id].append(event.token)
                rows_after_cut = batch.cache[0].keys.shape[0]
        if cut:
            assert rows_after_cut == 2
        return out

    assert run(cut=True) == run(cut=False)


def test_a_restored_prefix_that_gives_way_goes_a_layer_at_a_time() -> None:
    """A prompt restores its cached history as views of the entry's buffers; the entry may
    then give way to the prompt's own set-aside, its views still holding it. Copied into
    the prompt's buffer when the first chunk wrote, old and new buffers of every layer were
    live together through that pass: the window's peaks (issue #46 item 14). The copy is
    now made at admission, a layer at a time, so MLX's rise is the buffers' growth plus
    about a layer (before: the whole new buffers over the old ones); the prompt's history
    is as it was, and its chunk writes in place."""
    from types import SimpleNamespace

    from engine.kv_policy import KvPolicy
    from engine.prefix_cache import PrefixCache

    layers, history, new_tokens, max_tokens = 8, 2000, 100, 256
    per_token = layers * 2 * 4 * 64 * 4  # 8 layers of keys and values, 4 heads x 64, float32
    prefix = PrefixCache()
    entry = []
    for i in range(layers):
        c = KVCache()
        k = mx.random.normal((1, 4, history, 64), key=mx.random.key(i))
        c.update_and_fetch(k, k + 1)
        entry.append(c)
    tokens = [3 + (7 * j) % 500 for j in range(history)]
    prefix.insert(tokens, entry)
    kept = [(np.array(c.keys[..., :history, :]), np.array(c.values[..., :history, :]))
            for c in prefix.entries[0].cache]
    del entry, c, k
    prompt = tokens + [600 + j for j in range(new_tokens)]
    # room for the prompt's set-aside, not for the cached history beside it
    policy = KvPolicy(per_token * (history + new_tokens + 2 * max_tokens), per_token, 4096,
                      prefix)
    seq = SimpleNamespace(prompt_tokens=prompt, num_prompt_tokens=len(prompt),
                          params=SimpleNamespace(max_tokens=max_tokens), cache=None,
                          num_cached=0, cached_tokens=0, kv_reserved=0)
    assert policy.reserve(seq)
    old = history * per_token
    live = mx.get_active_memory()
    mx.reset_peak_memory()
    policy.start([seq], lambda: pytest.fail("the history was not restored"))
    assert seq.num_cached == history and not prefix.entries  # restored, then gave way
    # the first chunk's pass: every layer written, evaluated together
    chunk = mx.random.normal((1, 4, new_tokens, 64), key=mx.random.key(99))
    out = [layer.update_and_fetch(chunk, chunk + 1) for layer in seq.cache]
    mx.eval(out)
    del out
    new = sum(layer.keys.nbytes + layer.values.nbytes for layer in seq.cache)
    assert new == (len(prompt) + max_tokens) * per_token  # one buffer, sized once
    rise = mx.get_peak_memory() - live
    bound = new - old + 3 * new // layers + 2 * chunk.nbytes * layers
    assert rise <= bound, (rise, new - old, new // layers)
    for (k0, v0), layer in zip(kept, seq.cache, strict=True):
        assert np.array_equal(k0, np.array(layer.keys[..., :history, :]))
        assert np.array_equal(v0, np.array(layer.values[..., :history, :]))
        assert mx.array_equal(layer.keys[..., history:len(prompt), :], chunk).item()


def test_a_row_moved_into_a_leaving_rows_place_is_written_at_once() -> None:
    """Rows leaving a slot buffer leave gaps that the last rows move into. The moves were
    left to the next pass, each layer's update holding its moved row's copy: a long row's
    worth of MLX's live arrays after a busy session's leave (+144 MiB, issue #46 item 14).
    Now written at once: after the leave only the buffers are live, and every kept row's
    KV is as it was."""
    from engine import cache as kv

    layers = 8

    def solo(length: int, seed: int) -> list[KVCache]:
        return _solo_cache(length, seed, layers)

    batch = kv.start_batch([solo(2000 + 10 * i, i) for i in range(3)], 3, room=0)
    mx.eval([c.keys for c in batch] + [c.values for c in batch])
    before = [[tuple(np.array(a) for a in layer.row_kv(r)) for r in range(3)]
              for layer in batch]
    live = mx.get_active_memory()
    order = kv.keep_rows(batch, [1, 2])
    assert order == [2, 1]  # the case arose: the last row moved into row 0's place
    moved = 2020 * layers * 2 * 4 * 64 * 4  # the moved row's keys and values, every layer
    assert mx.get_active_memory() - live <= moved // layers, (
        mx.get_active_memory() - live, moved)
    for layer, rows in zip(batch, before, strict=True):
        for position, row in enumerate(order):
            k, v = (np.array(a) for a in layer.row_kv(position))
            assert np.array_equal(k, rows[row][0]) and np.array_equal(v, rows[row][1])


@pytest.mark.parametrize("grows", [True, False], ids=["buffers_grow", "rows_made_ahead"])
def test_prompts_joining_a_batch_are_let_go_a_layer_at_a_time(grows) -> None:
    """Prompts joining a decode batch hand their own caches over: each layer of theirs is
    let go once its copy into the batch's buffers is made. Held until every layer was
    copied, they stayed whole beside the batch's new buffers: two long prompts joining a
    4-row batch were the window's highest MLX peak (1,114 MiB, 861 after; issue #46 item
    14). MLX's rise is now what the join adds beyond the prompts' own KV plus about a
    layer, and the rows hold the prompts' KV as it was."""
    from engine import cache as kv

    layers = 16

    def solo(length: int, seed: int) -> list[KVCache]:
        return _solo_cache(length, seed, layers)

    # rows_made_ahead: room for the two made when the batch started (the join then grows
    # nothing, and its writes are evaluated a layer at a time too)
    batch = kv.start_batch([solo(1500 + 10 * i, i) for i in range(3)], 3 if grows else 5,
                           room=0 if grows else None)
    mx.eval([c.keys for c in batch] + [c.values for c in batch])
    joining = [solo(1400, 8), solo(1450, 9)]
    want = [[(np.array(c.keys[..., :c.offset, :]), np.array(c.values[..., :c.offset, :]))
             for c in cache] for cache in joining]
    solos = sum(c.keys.nbytes + c.values.nbytes for cache in joining for c in cache)
    old = sum(layer.nbytes for layer in batch)
    live = mx.get_active_memory()
    mx.reset_peak_memory()
    kv.add_rows(batch, joining, 5, hand_over=True)
    grown = sum(layer.nbytes for layer in batch)
    assert (grown > old) is grows  # the case arose
    assert all(layer is None for cache in joining for layer in cache)  # given up
    rise = mx.get_peak_memory() - live
    assert rise <= max(0, grown - old - solos) + 2 * grown // layers, (
        rise, grown - old, solos, grown // layers)
    # and after it, the prompts' own KV is gone (the caller kept no other reference)
    assert mx.get_active_memory() - live <= grown - old - solos + grown // layers
    for layer, rows in zip(batch, zip(*want, strict=True), strict=True):
        for row, (k, v) in enumerate(rows, start=3):
            got_k, got_v = layer.row_kv(row)
            assert np.array_equal(np.array(got_k), k) and np.array_equal(np.array(got_v), v)


def _solo_cache(length: int, seed: int, layers: int) -> list[KVCache]:
    """A prompt's own cache of `length` positions: `layers` layers of 4 heads x 64 random
    float32 keys (values: keys + 1), evaluated."""
    out = []
    for i in range(layers):
        c = KVCache()
        k = mx.random.normal((1, 4, length, 64), key=mx.random.key(seed * 100 + i))
        c.update_and_fetch(k, k + 1)
        out.append(c)
    mx.eval([c.keys for c in out] + [c.values for c in out])
    return out
