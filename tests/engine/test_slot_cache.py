"""engine.slot_cache: the decode batch's rows keep exactly their own KV through steps,
joins, leaves (rows moving into gaps) and growth; masks and positions follow each row's
length; growth is spread over steps, one layer at a time.

The ground truth is kept in numpy, row by row, as if each sequence had its own cache.
"""

from __future__ import annotations

import random

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import KVCache, RotatingKVCache

from engine import cache as kv
from engine import slot_cache
from engine.slot_cache import SlotKVCache, supports

H, D, LAYERS = 2, 8, 3


def solo(rng: np.random.Generator, length: int) -> tuple[list[KVCache], list[np.ndarray]]:
    """A sequence's caches (one per layer) and the same KV in numpy, (H, length, 2D)."""
    caches, truth = [], []
    for _ in range(LAYERS):
        k = rng.standard_normal((1, H, length, D)).astype(np.float32)
        v = rng.standard_normal((1, H, length, D)).astype(np.float32)
        c = KVCache()
        c.update_and_fetch(mx.array(k), mx.array(v))
        caches.append(c)
        truth.append(np.concatenate([k[0], v[0]], axis=-1))
    return caches, truth


def step(batch: kv.LayerCaches, truth: list[list[np.ndarray]], rng: np.random.Generator
         ) -> None:
    n = len(truth)
    for layer_i, layer in enumerate(batch):
        k = rng.standard_normal((n, H, 1, D)).astype(np.float32)
        v = rng.standard_normal((n, H, 1, D)).astype(np.float32)
        keys, values = layer.update_and_fetch(mx.array(k), mx.array(v))
        # read back whole, once a layer (an MLX slice read row by row cost ~0.1 ms each)
        keys, values = np.array(keys), np.array(values)
        for r in range(n):
            truth[r][layer_i] = np.concatenate(
                [truth[r][layer_i], np.concatenate([k[r], v[r]], axis=-1)], axis=1)
            length = truth[r][layer_i].shape[1]
            # what attention reads: the row's own keys, in order, then columns it masks out
            assert np.array_equal(keys[r, :, :length], truth[r][layer_i][..., :D])
            assert np.array_equal(values[r, :, :length], truth[r][layer_i][..., D:])


def check_rows(batch: kv.LayerCaches, truth: list[list[np.ndarray]]) -> None:
    assert [layer.lengths for layer in batch] == [[t[0].shape[1] for t in truth]] * LAYERS
    for r, row_truth in enumerate(truth):
        out = kv.extract(batch, r)
        for layer_i, c in enumerate(out):
            assert c.offset == row_truth[layer_i].shape[1]
            got = np.concatenate([np.array(c.keys[0]), np.array(c.values[0])], axis=-1)
            assert np.array_equal(got, row_truth[layer_i]), f"row {r}, layer {layer_i}"


@pytest.fixture(params=["native", "mlx-scatter"])
def write_path(request, monkeypatch) -> str:
    """The step's write: engine.native's op on a CPU with the extension, else mlx's scatter
    (GPUs); the scatter path is forced by making the extension look unavailable."""
    from engine import native

    if request.param == "native":
        if native.unavailable_reason() is not None:
            pytest.skip(f"engine.native unavailable: {native.unavailable_reason()}")
    else:
        monkeypatch.setattr(native, "unavailable_reason", lambda: "off for this test")
    return request.param


@pytest.mark.parametrize("seed", range(6))
def test_rows_keep_their_own_kv_through_steps_joins_leaves_and_growth(seed, write_path) -> None:
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    first = [solo(rng, pick.randint(1, 40)) for _ in range(pick.randint(2, 5))]
    batch = kv.start_batch([c for c, _ in first])
    assert isinstance(batch[0], SlotKVCache)
    assert batch[0]._native == (write_path == "native")
    truth = [t for _, t in first]
    for _ in range(8):
        for _ in range(pick.randint(1, 30)):  # crosses the 256-column steps now and then
            step(batch, truth, rng)
        check_rows(batch, truth)
        keep = sorted(pick.sample(range(len(truth)), pick.randint(1, len(truth))))
        order = kv.keep_rows(batch, keep)
        assert sorted(order) == keep
        truth = [truth[r] for r in order]
        check_rows(batch, truth)
        joining = [solo(rng, pick.randint(1, 300)) for _ in range(pick.randint(0, 9))]
        if joining:
            kv.add_rows(batch, [c for c, _ in joining])
            truth += [t for _, t in joining]
        check_rows(batch, truth)


def test_leaving_rows_are_replaced_by_the_last_rows_and_the_rest_stay() -> None:
    rng = np.random.default_rng(0)
    batch = kv.start_batch([solo(rng, 5)[0] for _ in range(6)])
    # rows 1 and 2 leave: rows 4 and 5 take their places, 0 and 3 stay where they are
    assert kv.keep_rows(batch, [0, 3, 4, 5]) == [0, 4, 5, 3]


def test_mask_and_positions_follow_each_rows_length() -> None:
    rng = np.random.default_rng(1)
    lengths = [3, 7, 1]
    batch = kv.start_batch([solo(rng, n)[0] for n in lengths])
    layer = batch[0]
    assert layer.offset.tolist() == lengths
    mask = np.array(layer.make_mask(1))  # before the step's keys go in
    assert mask.shape == (3, 1, 1, 8)
    assert mask[:, 0, 0].tolist() == [[c <= n for c in range(8)] for n in lengths]
    two = np.array(layer.make_mask(2))  # two queries a row (each sees up to itself)
    assert two.shape == (3, 1, 2, 9)
    assert two[1, 0, 1].tolist() == [c <= 8 for c in range(9)]
    assert two[2, 0, 0].tolist() == [c <= 1 for c in range(9)]
    windowed = np.array(layer.make_mask(1, window_size=2))
    assert windowed[1, 0, 0].tolist() == [c in (6, 7) for c in range(8)]


def test_growth_is_spread_one_layer_a_step() -> None:
    """Growing a buffer copies it: with grow_ahead before each step no step grows more
    than one layer, and a step never has to grow one itself."""
    rng = np.random.default_rng(2)
    batch = kv.start_batch([solo(rng, 250)[0] for _ in range(4)])
    assert {layer.keys.shape[2] for layer in batch} == {256}
    grown_together = []
    for _ in range(200):  # 250 -> 450 columns: one step of growth
        kv.grow_ahead(batch)
        before = [layer.keys.shape[2] for layer in batch]
        for layer in batch:
            k = mx.zeros((4, H, 1, D))
            layer.update_and_fetch(k, k)
        after = [layer.keys.shape[2] for layer in batch]
        assert before == after, "a step grew a buffer itself"
        grown_together.append(before)
    capacities = [set(c) for c in grown_together]
    assert all(len(c) <= 2 for c in capacities)
    assert capacities[-1] == {512}
    changed = [sum(a != b for a, b in zip(x, y, strict=True))
               for x, y in zip(grown_together, grown_together[1:], strict=False)]
    assert max(changed) == 1


def test_other_cache_kinds_keep_mlx_lms_batch_class() -> None:
    rng = np.random.default_rng(3)
    plain = [solo(rng, 4)[0] for _ in range(2)]
    assert all(supports(c) for c in plain)
    rotating = [RotatingKVCache(max_size=8) for _ in range(LAYERS)]
    for c in rotating:
        c.update_and_fetch(mx.zeros((1, H, 3, D)), mx.zeros((1, H, 3, D)))
    assert not supports(rotating)
    batch = kv.start_batch([rotating, rotating])
    assert not isinstance(batch[0], SlotKVCache)
    assert kv.keep_rows(batch, [1]) == [1]


def test_room_is_made_for_the_rows_still_coming() -> None:
    """A batch told how many more sequences are prefilling makes room for them at once, so
    their joining copies only their own rows (no growth, which copies every row)."""
    rng = np.random.default_rng(4)
    batch = kv.start_batch([solo(rng, 10)[0] for _ in range(2)], rows=20)
    buffers = [layer.keys.shape for layer in batch]
    assert buffers[0][0] >= 20
    kv.add_rows(batch, [solo(rng, 12)[0] for _ in range(18)])
    assert [layer.keys.shape for layer in batch] == buffers


def test_native_write_leaves_a_buffer_held_elsewhere_unchanged(write_path) -> None:
    if write_path != "native":
        pytest.skip("engine.native's op")
    from engine import native

    rng = np.random.default_rng(5)
    start = rng.standard_normal((4, 2, 16, 8)).astype(np.float32)
    update = rng.standard_normal((3, 2, 2, 8)).astype(np.float32)
    lengths = [0, 5, 14]
    want = start.copy()
    for b, at in enumerate(lengths):
        want[b, :, at:at + 2] = update[b]
    held = mx.array(start)
    out = native.kv_write(held, mx.array(update), mx.array(lengths))
    assert np.array_equal(np.array(out), want)
    assert np.array_equal(np.array(held), start)  # still held here: written into a copy
    alone = native.kv_write(mx.array(start), mx.array(update), mx.array(lengths))
    assert np.array_equal(np.array(alone), want)


def test_an_emptied_batch_is_reused_by_the_next_one(write_path) -> None:
    """A new batch written into the last one's buffers (no fresh memory to fault in) holds
    exactly its rows' KV, over whatever the old rows left in the buffer, and steps on."""
    rng = np.random.default_rng(6)
    old = kv.start_batch([solo(rng, 30)[0] for _ in range(5)], rows=8)
    buffers = [id(layer) for layer in old]
    shapes = [layer.keys.shape for layer in old]
    kv.keep_rows(old, [])
    first = [solo(rng, n) for n in (12, 3, 20)]
    batch = kv.start_batch([c for c, _ in first], rows=4, reuse=old)
    assert [id(layer) for layer in batch] == buffers
    assert [layer.keys.shape for layer in batch] == shapes  # no new allocation
    truth = [t for _, t in first]
    check_rows(batch, truth)
    for _ in range(5):
        step(batch, truth, rng)
    check_rows(batch, truth)
    # rows of another shape of KV cannot go into it: a new batch is made
    other = [[KVCache() for _ in range(LAYERS)]]
    for c in other[0]:
        c.update_and_fetch(mx.zeros((1, H + 1, 2, D)), mx.zeros((1, H + 1, 2, D)))
    assert kv.start_batch(other * 2, reuse=batch) is not batch


def test_a_buffer_left_much_bigger_than_its_rows_is_cut_to_fit(write_path, monkeypatch) -> None:
    """Issue #46 item 14: 8 rows of 300 keys, then 2 rows stay: the buffer (8 rows) shrinks
    to theirs, every kept key bit for bit; a new row grows it again. (The test's layers are
    small: any unused room counts.)"""
    monkeypatch.setattr(slot_cache, "SHRINK_MIN_BYTES", 0)
    rng = np.random.default_rng(3)
    first = [solo(rng, 300) for _ in range(8)]
    batch = kv.start_batch([c for c, _ in first])
    truth = [t for _, t in first]
    before = batch[0].nbytes
    order = kv.keep_rows(batch, [1, 6])
    truth = [truth[r] for r in order]
    kv.shrink(batch)
    assert batch[0].keys.shape[0] == 2 and batch[0].nbytes * 4 <= before
    check_rows(batch, truth)
    step(batch, truth, rng)
    check_rows(batch, truth)
    joining = solo(rng, 20)
    kv.add_rows(batch, [joining[0]])
    check_rows(batch, [*truth, joining[1]])


def test_a_buffer_its_rows_still_use_stays() -> None:
    rng = np.random.default_rng(4)
    batch = kv.start_batch([solo(rng, 30)[0] for _ in range(3)])
    buffers = [layer.keys for layer in batch]
    kv.keep_rows(batch, [0, 2])
    kv.shrink(batch)  # 8 rows of room for 2, but a few KiB unused: no copy
    assert all(layer.keys is b for layer, b in zip(batch, buffers, strict=True))
