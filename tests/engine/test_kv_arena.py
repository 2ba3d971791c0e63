"""engine.kv_arena (issue #47, one KV layout): rows as column ranges of one arena per layer.

- native.kv_write_columns writes each row's keys at its own arena columns, nothing else;
- a batch over an arena keeps each row's own KV through steps, joins, leaves, a row's
  range growing or moving, the arena growing (once for rows joining together, by what they
  need or a quarter), shrinking and compaction (truth kept in numpy, row by row), and its
  attention gives the bits of native.cache_attention over the rows stacked;
- prompts prefilled straight into their ranges (ArenaRow) then decoded as one batch over
  the arena, no copy at the join, give each prompt's logits alone, bit for bit.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import KVCache

from engine import native
from engine.cpu_options import CpuOptions
from engine.kv_arena import COLUMN_STEP, ArenaKVCache, ArenaRow, KvArena
from engine.model_runner import ModelRunner
from engine.slot_cache import RowIndex, row_mask

pytestmark = pytest.mark.usefixtures("native_built")

H, D = 2, 8


def test_kv_write_columns_writes_each_row_at_its_columns_only() -> None:
    rng = np.random.default_rng(0)
    arena = rng.standard_normal((1, H, 64, D)).astype(np.float32)
    update = rng.standard_normal((3, H, 2, D)).astype(np.float32)
    columns = [40, 3, 17]
    got = np.array(native.kv_write_columns(mx.array(arena), mx.array(update),
                                           mx.array(columns)))
    want = arena.copy()
    for b, at in enumerate(columns):
        want[0, :, at:at + 2] = update[b]
    assert np.array_equal(got, want)


def test_kv_write_columns_refuses_a_batched_buffer() -> None:
    with pytest.raises(ValueError, match="arena"):
        native.kv_write_columns(mx.zeros((2, H, 8, D)), mx.zeros((1, H, 1, D)),
                                mx.array([0]))


def solo(rng: np.random.Generator, length: int) -> tuple[KVCache, np.ndarray]:
    k = rng.standard_normal((1, H, length, D)).astype(np.float32)
    v = rng.standard_normal((1, H, length, D)).astype(np.float32)
    cache = KVCache()
    cache.update_and_fetch(mx.array(k), mx.array(v))
    return cache, np.concatenate([k[0], v[0]], axis=-1)


def check(batch: ArenaKVCache, truth: list[np.ndarray]) -> None:
    assert batch.lengths == [t.shape[1] for t in truth]
    for r, want in enumerate(truth):
        c = batch.extract(r)
        got = np.concatenate([np.array(c.keys[0]), np.array(c.values[0])], axis=-1)
        assert np.array_equal(got, want), f"row {r}"
    starts = sorted((r.start, r.start + r.cap) for r in batch.arena.regions)
    assert all(a[1] <= b[0] for a, b in zip(starts, starts[1:], strict=False)), "ranges overlap"
    assert starts[-1][1] <= batch.arena.capacity


def step(batch: ArenaKVCache, truth: list[np.ndarray], rng: np.random.Generator,
         steps: int = 1) -> None:
    n = len(truth)
    k = rng.standard_normal((n, H, steps, D)).astype(np.float32)
    v = rng.standard_normal((n, H, steps, D)).astype(np.float32)
    q = mx.array(rng.standard_normal((n, 2 * H, steps, D)).astype(np.float32))
    mask = batch.make_mask(steps)
    batch.update_and_fetch(mx.array(k), mx.array(v))
    for r in range(n):
        truth[r] = np.concatenate([truth[r], np.concatenate([k[r], v[r]], axis=-1)], axis=1)
    # attention through the rows' offsets = over the rows stacked in one buffer
    width = max(t.shape[1] for t in truth)
    stacked = np.zeros((n, H, width, 2 * D), np.float32)
    for r, t in enumerate(truth):
        stacked[r, :, :t.shape[1]] = t
    got = batch.attend(q, 0.3, mask)
    want = native.cache_attention(q, mx.array(stacked[..., :D]), mx.array(stacked[..., D:]),
                                  0.3, mask)
    assert np.array_equal(np.array(got), np.array(want))


@pytest.mark.parametrize("seed", range(4))
def test_rows_keep_their_own_kv_through_steps_joins_leaves_growth_and_compaction(seed) -> None:
    rng = np.random.default_rng(seed)
    first, t0 = solo(rng, 5)
    batch = ArenaKVCache.like(first)
    batch.add([first], room=1)  # a range with little room: it must grow or move
    truth = [t0]
    for _ in range(3):
        c, t = solo(rng, int(rng.integers(1, 300)))
        batch.add([c], room=int(rng.integers(1, 40)))
        truth.append(t)
    for i in range(40):
        step(batch, truth, rng, steps=1 if i % 7 else 3)
        if i % 9 == 4:  # a row leaves; no other row moves
            gone = int(rng.integers(len(truth)))
            before = [(r.start, r.length) for j, r in enumerate(batch.rows) if j != gone]
            batch.keep([j for j in range(len(truth)) if j != gone])
            truth.pop(gone)
            assert [(r.start, r.length) for r in batch.rows] == before
        if i % 9 == 6:  # one joins, longer than any gap may be: the arena may double
            c, t = solo(rng, int(rng.integers(1, 600)))
            batch.add([c], room=int(rng.integers(1, 40)))
            truth.append(t)
        check(batch, truth)
    batch.arena.compact()
    check(batch, truth)
    assert [r.start for r in sorted(batch.arena.regions, key=lambda r: r.start)][0] == 0
    step(batch, truth, rng)
    check(batch, truth)


def test_an_arena_left_mostly_empty_shrinks_and_keeps_the_rows_bits(monkeypatch) -> None:
    from engine import kv_arena

    monkeypatch.setattr(kv_arena, "SHRINK_MIN_BYTES", 0)
    rng = np.random.default_rng(3)
    first, t0 = solo(rng, 40)
    batch = ArenaKVCache.like(first)
    truth = []
    for n in (40, 700, 900, 30, 500):
        c, t = (first, t0) if not truth else solo(rng, n)
        batch.add([c])
        truth.append(t)
    step(batch, truth, rng)
    wide = batch.arena.capacity
    batch.keep([0, 3])
    truth = [truth[0], truth[3]]
    assert batch.arena.shrink()
    assert batch.arena.capacity < wide // 2
    check(batch, truth)
    step(batch, truth, rng)
    check(batch, truth)
    assert not batch.arena.shrink()  # it fits now


def test_rows_joining_together_grow_the_arena_once_and_by_what_they_need(monkeypatch
                                                                         ) -> None:
    """Issue #46's window peak: growing holds the old buffers and the new at once, so the
    arena grows once for rows joining together (and the rows said to be coming), by what
    they need or a quarter of itself, not by doubling; the rows keep their bits."""
    from engine import kv_arena

    resized = []
    resize = KvArena._resize
    monkeypatch.setattr(KvArena, "_resize",
                        lambda self, *a: resized.append(a) or resize(self, *a))
    rng = np.random.default_rng(5)
    made = [solo(rng, n) for n in (300, 40, 500, 20)]
    batch = ArenaKVCache.like(made[0][0])
    batch.add([c for c, _ in made], room=16, coming=2)
    assert len(resized) == 1  # one growth for the four rows and room for two more
    caps = [512, 256, 768, 256]
    assert batch.arena.capacity == sum(caps) + 2 * max(caps)
    truth = [t for _, t in made]
    check(batch, truth)
    wide = [solo(rng, 7 * COLUMN_STEP)]  # wider than the free columns: it grows
    before = batch.arena.capacity
    batch.add([c for c, _ in wide], room=1)
    truth += [t for _, t in wide]
    grown = batch.arena.capacity
    assert len(resized) == 2 and grown < 2 * before
    assert grown >= before + before // kv_arena.GROWTH_DIVISOR
    check(batch, truth)
    step(batch, truth, rng)
    check(batch, truth)


def test_a_row_takes_the_free_columns_after_it_without_moving() -> None:
    rng = np.random.default_rng(7)
    c, t = solo(rng, COLUMN_STEP - 1)
    batch = ArenaKVCache.like(c, columns=4 * COLUMN_STEP)
    batch.add([c], room=1)
    start = batch.rows[0].start
    truth = [t]
    for _ in range(3):
        step(batch, truth, rng)
    assert batch.rows[0].start == start and batch.rows[0].cap > COLUMN_STEP
    check(batch, truth)


def test_a_prompt_prefilled_into_its_range_then_batched_decodes_as_alone(tiny, monkeypatch
                                                                        ) -> None:
    # the step built op by op (the compiled one: test_compiled_arena_steps_...)
    runner = ModelRunner(tiny.model, cpu=CpuOptions(), compiled_decode=False)
    attended = []
    attend = ArenaKVCache.attend
    monkeypatch.setattr(ArenaKVCache, "attend",
                        lambda self, *a, **k: attended.append(1) or attend(self, *a, **k))
    prompts = [[1, 5, 9, 22, 7, 3, 11], [4, 8], [30, 2, 2, 17, 6]]
    steps = 6

    def alone(prompt: list[int]) -> list[np.ndarray]:
        cache = [KVCache() for _ in runner.model.layers]
        logits = runner.prefill(cache, prompt, logits=True)
        outs, token = [np.array(logits)], int(mx.argmax(logits[0]).item())
        for _ in range(steps):
            logits = runner.decode(cache, [token])
            mx.eval(logits)
            outs.append(np.array(logits))
            token = int(mx.argmax(logits[0]).item())
        return outs

    want = [alone(p) for p in prompts]
    probe = [KVCache() for _ in runner.model.layers]
    runner.prefill(probe, [1])
    arenas = [KvArena(c.keys.shape[1], (c.keys.shape[3], c.values.shape[3]), c.keys.dtype)
              for c in probe]
    rows, firsts = [], []
    for prompt in prompts:  # each prompt in its own range of the one arena a layer
        row = [ArenaRow(a, len(prompt) + 2) for a in arenas]
        firsts.append(np.array(runner.prefill(row, prompt, logits=True)))
        rows.append(row)
    batch = [ArenaKVCache(a) for a in arenas]
    for layer, i in zip(batch, range(len(arenas)), strict=True):
        layer.adopt([row[i] for row in rows])  # no copy: the ranges are the rows
    tokens = [int(np.argmax(f[0])) for f in firsts]
    got = [[f] for f in firsts]
    for _ in range(steps):
        logits = runner.decode(batch, tokens)
        mx.eval(logits)
        for r in range(len(prompts)):
            got[r].append(np.array(logits[r:r + 1]))
        tokens = [int(np.argmax(g[-1][0])) for g in got]
    for r in range(len(prompts)):
        for s in range(steps + 1):
            assert np.array_equal(got[r][s], want[r][s]), f"prompt {r}, step {s}"
    assert all(layer.lengths == [len(p) + steps for p in prompts] for layer in batch)
    assert len(attended) == steps * len(batch)  # each layer read its rows where they are
    # the prompts' ranges are where they were prefilled: nothing was copied in
    assert [r.start for r in batch[0].rows] == [row[0].region.start for row in rows]


def test_row_mask_is_the_slot_batchs() -> None:
    arena = KvArena(H, (D, D), mx.float32)
    batch = ArenaKVCache(arena)
    for n in (3, 9):
        c = KVCache()
        c.update_and_fetch(mx.zeros((1, H, n, D)), mx.zeros((1, H, n, D)))
        batch.add([c])
    assert np.array_equal(np.array(batch.make_mask(1)),
                          np.array(row_mask(mx.array([3, 9]), 1, 10)))


@pytest.fixture(scope="module")
def qtiny():
    from tests.engine.conftest import quantized_tiny

    return quantized_tiny(seed=11, hidden=128)  # head size 32: packed KV takes it


@pytest.mark.parametrize("kv_bits", [None, 8, 4])
def test_an_engine_with_the_arena_layout_gives_each_prompt_its_tokens_alone(
        qtiny, monkeypatch, kv_bits) -> None:
    """BATCHCHAT_KV_ARENA (CpuOptions.kv_arena): the decode batch's rows in one arena per
    layer, joining while others decode and leaving at different lengths; every reply is
    its run alone (the slot layout's), packed KV too, and the rows were read through the
    arena (ragged passes and plain steps)."""
    from engine import SamplingParams
    from engine import cache as kv
    from tests.engine.conftest import engine_on, prompts, run_to_end

    attended: list[int] = []
    attend = ArenaKVCache.attend
    monkeypatch.setattr(ArenaKVCache, "attend",
                        lambda self, *a, **k: attended.append(1) or attend(self, *a, **k))
    ps = prompts(6, seed=11)
    lengths = [5, 30, 12, 40, 8, 25]
    config = {} if kv_bits is None else {"kv_bits": kv_bits}
    alone = []
    for p, n in zip(ps, lengths, strict=True):
        engine = engine_on(qtiny, cpu=CpuOptions(), **config)
        s = engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n))
        run_to_end(engine)
        alone.append(s.tokens)
    engine = engine_on(qtiny, max_concurrent=6, cpu=CpuOptions(kv_arena=True), **config)
    # (after the load: its runner checks the arena on two rows of each layout)
    started = kv.start_batch
    arenas: list[bool] = []
    monkeypatch.setattr(kv, "start_batch", lambda *a, **k: arenas.append(k.get("arena"))
                        or started(*a, **k))
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n))
               for p, n in zip(ps[:3], lengths[:3], strict=True)]
    for _ in range(4):
        engine.step()
    streams += [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n))
                for p, n in zip(ps[3:], lengths[3:], strict=True)]
    run_to_end(engine)
    assert [s.tokens for s in streams] == alone
    assert arenas and all(arenas) and attended


def test_compiled_arena_steps_give_the_bits_of_steps_built_op_by_op(qtiny) -> None:
    """The compiled decode step over an arena (one graph a layout of ranges): the logits of
    the step built op by op, bit for bit, through rows moving as they outgrow their ranges
    and a row leaving; one trace a layout."""
    from engine import cache as kv
    from engine.compiled_step import CompiledDecode
    from tests.engine.conftest import prompts

    runner = ModelRunner(qtiny.model, cpu=CpuOptions(kv_arena=True))
    assert runner.compiled is not None and runner.kv_arena
    ps = prompts(4, seed=5)

    def batch() -> list:
        solo = []
        for p in ps:
            cache = kv.new_cache(qtiny.model)
            runner.prefill(cache, p)
            solo.append(cache)
        index = RowIndex()
        layers = [ArenaKVCache.like(c, index) for c in solo[0]]
        for i, layer in enumerate(layers):
            layer.add([c[i] for c in solo], room=1)  # no room: rows move as they grow
        return layers

    compiled, plain = batch(), batch()
    assert CompiledDecode.usable(compiled)
    tokens = [p[-1] for p in ps]
    starts = [r.start for r in compiled[0].rows]
    for step in range(300):
        if step == 150:
            kv.keep_rows(compiled, [0, 2, 3])
            kv.keep_rows(plain, [0, 2, 3])
            tokens = [tokens[i] for i in (0, 2, 3)]
        got = runner.compiled.step(compiled, tokens)
        with runner._kernels():
            want = runner.model(mx.array(tokens)[:, None], cache=plain)[:, -1, :]
        mx.eval(got, want)
        assert mx.array_equal(got, want).item(), f"step {step}"
        assert compiled[0].lengths == plain[0].lengths
        tokens = mx.argmax(want, axis=-1).tolist()
    assert [r.start for r in compiled[0].rows] != [starts[i] for i in (0, 2, 3)]  # moved
    # one graph a layout: far fewer traces than steps
    assert 3 <= runner.compiled.traces <= 16
