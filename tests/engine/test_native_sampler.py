"""engine.native.sample_tokens (issue #26): one token per row with mlx-lm's filters (top-p,
then min-p, then top-k) and a draw at the row's temperature, without sorting the vocabulary;
and engine.device_sampler.sample_tokens, the same contract as one graph of MLX ops for GPUs
(run here on the CPU: the ops are the same on every device).

Exact check of the distribution, no statistics: a token is drawn where the cumulative
probability of the kept tokens first exceeds u, so over a grid of N evenly spaced u each
token's share of the grid is its probability to within 1/N. That share must match mlx-lm's
own sampler's distribution (its filters applied to the log-probabilities, then softmax at the
temperature) token by token."""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p

from engine import device_sampler, native

pytestmark = pytest.mark.usefixtures("native_built")

GRID = 20000
IMPLS = {"native": native.sample_tokens, "device": device_sampler.sample_tokens}


def _mlx_lm_probs(logits: np.ndarray, temp: float, top_p: float, min_p: float,
                  top_k: int) -> np.ndarray:
    """The distribution mlx-lm's make_sampler draws from, in float64."""
    x = mx.array(logits[None])
    x = x - mx.logsumexp(x, axis=-1, keepdims=True)
    if 0 < top_p < 1:
        x = apply_top_p(x, top_p)
    if min_p:
        x = apply_min_p(x, min_p)
    if top_k:
        x = apply_top_k(x, top_k)
    kept = np.array(x[0]).astype(np.float64)
    w = np.where(np.isfinite(kept), np.exp((kept - kept[np.isfinite(kept)].max()) / temp), 0)
    return w / w.sum()


def _grid_shares(logits: np.ndarray, temp: float, top_p: float, min_p: float,
                 top_k: int, impl: str = "native") -> np.ndarray:
    u = (np.arange(GRID) + 0.5) / GRID
    rows = mx.array(np.broadcast_to(logits, (GRID, logits.size)).astype(np.float32))
    params = mx.array(np.tile([temp, top_p, min_p, float(top_k)], (GRID, 1)).astype(np.float32))
    tokens = np.array(IMPLS[impl](rows, mx.array(u.astype(np.float32)), params))
    return np.bincount(tokens, minlength=logits.size) / GRID


def _logits(kind: str, v: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "spread":
        return rng.normal(0, 3, v)
    if kind == "peaked":
        out = rng.normal(0, 1, v)
        out[rng.integers(v)] += 12
        return out
    out = np.round(rng.normal(0, 2, v))  # many exact ties, also at the cut
    return out


@pytest.mark.parametrize("impl", sorted(IMPLS))
@pytest.mark.parametrize("kind", ["spread", "peaked", "ties"])
@pytest.mark.parametrize(("temp", "top_p", "min_p", "top_k"), [
    (0.7, 0.95, 0.05, 0),  # the chat tabs' defaults
    (1.0, 0.0, 0.0, 0), (1.5, 0.5, 0.0, 0), (0.8, 0.0, 0.1, 0), (1.0, 0.0, 0.0, 20),
    (0.7, 0.9, 0.02, 40)])
def test_distribution_equals_mlx_lm_sampler(impl, kind, temp, top_p, min_p, top_k) -> None:
    logits = _logits(kind, 600, seed=hash((kind, temp, top_k)) & 0xFFFF)
    want = _mlx_lm_probs(logits, temp, top_p, min_p, top_k)
    got = _grid_shares(logits, temp, top_p, min_p, top_k, impl)
    assert set(np.flatnonzero(got)) <= set(np.flatnonzero(want))  # only kept tokens drawn
    assert np.all(np.abs(got - want) <= 1.0 / GRID + 1e-6), np.abs(got - want).max()


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_full_vocabulary_rows_each_with_their_own_params(impl) -> None:
    rng = np.random.default_rng(7)
    v = 49152
    logits = rng.normal(0, 2, (3, v)).astype(np.float32)
    logits[1, 123] += 30  # one token holds all the mass after the filters
    params = np.array([[0.7, 0.95, 0.05, 0], [1.0, 0.95, 0.05, 0], [1.0, 0.0, 0.0, 1]],
                      dtype=np.float32)
    u = np.array([0.5, 0.999, 0.3], dtype=np.float32)
    tokens = np.array(IMPLS[impl](mx.array(logits), mx.array(u), mx.array(params)))
    assert tokens[1] == 123
    assert tokens[2] == int(np.argmax(logits[2]))  # top-k 1 is greedy
    kept = _mlx_lm_probs(logits[0].astype(np.float64), 0.7, 0.95, 0.05, 0)
    assert kept[tokens[0]] > 0


def test_a_row_with_nothing_to_draw_gives_token_zero_and_bad_shapes_raise() -> None:
    logits = mx.array(np.full((1, 10), -math.inf, dtype=np.float32))
    params = mx.array([[1.0, 0.0, 0.0, 0.0]])
    for impl in IMPLS.values():
        assert np.array(impl(logits, mx.array([0.5]), params)).tolist() == [0]
    with pytest.raises(ValueError, match="params"):
        native.sample_tokens(mx.zeros((2, 10)), mx.array([0.5, 0.5]), params)


def _reference_draws(logits: np.ndarray, temp: float, top_p: float, min_p: float,
                     u: np.ndarray, shift: int = 0) -> np.ndarray:
    """The tokens mlx-lm's filters and the draw in id order give, in float64: top-p's cut
    at the value where the descending mass first reaches top_p of the whole (`shift`: that
    many ranks lower), min-p's floor, every token at or above both kept."""
    x = logits.astype(np.float64)
    m = x.max()
    order = np.argsort(-x, kind="stable")
    mass = np.exp(x[order] - m)
    keep = int(np.searchsorted(np.cumsum(mass), top_p * mass.sum())) + 1 + shift
    cut = max(x[order[keep - 1]], np.float32(m) + np.log(np.float32(min_p)) if min_p else -np.inf)
    kept = np.flatnonzero(x >= cut)
    running = np.cumsum(np.exp((x[kept] - m) / temp))
    return kept[np.minimum(np.searchsorted(running, u * running[-1], side="right"),
                           kept.size - 1)]


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("std", [0.8, 0.05])
@pytest.mark.parametrize(("temp", "top_p", "min_p"), [(0.7, 0.95, 0.05), (1.0, 0.9, 0.0)])
def test_a_flat_full_vocabulary_row_keeps_the_reference_set(ties, std, temp, top_p,
                                                           min_p) -> None:
    """A random-weight model's row (151,936 logits, std ~0.8: tens of thousands of tokens
    past min-p, top-p's cut deep in them; the sampler orders only the values of the cut's
    value bucket); std 0.05: every token past min-p and thousands in the cut's bucket; with
    ties, many tokens share the cut's value."""
    rng = np.random.default_rng(11)
    logits = rng.normal(0, std, 151936).astype(np.float32)
    if ties:
        logits = np.round(logits * 16) / 16
    u = ((np.arange(48) + 0.5) / 48).astype(np.float32)
    rows = mx.array(np.broadcast_to(logits, (u.size, logits.size)))
    params = mx.array(np.tile([temp, top_p, min_p, 0.0], (u.size, 1)).astype(np.float32))
    got = np.array(native.sample_tokens(rows, mx.array(u), params))
    # the whole mass top-p compares against is summed in float lanes (~1e-6 of it), so
    # the cut may fall one token either side of the exact one; never further
    wants = [_reference_draws(logits, temp, top_p, min_p, u.astype(np.float64), shift)
             for shift in (0, -1, 1)]
    assert any((got == want).all() for want in wants), [np.flatnonzero(got != w) for w in wants]


def test_engine_rows_drawn_in_one_native_op_and_each_row_as_if_alone(monkeypatch) -> None:
    from engine import sampling
    from engine.sampling_params import SamplingParams

    calls: list[int] = []
    real = native.sample_tokens
    monkeypatch.setattr(native, "sample_tokens",
                        lambda logits, *a, **k: calls.append(logits.shape[0]) or real(
                            logits, *a, **k))
    rng = np.random.default_rng(3)
    logits = mx.array(rng.normal(0, 2, (4, 300)).astype(np.float32))
    samplers = [sampling.RowSampler(SamplingParams(temperature=0.7, top_p=0.95, min_p=0.05), 11),
                sampling.RowSampler(SamplingParams(temperature=0.0), 12),
                sampling.RowSampler(SamplingParams(temperature=1.2, top_k=5), 13),
                sampling.RowSampler(SamplingParams(temperature=0.7, top_p=0.95, min_p=0.05), 14)]
    together = np.array(sampling.sample_rows(samplers, [[1, 2]] * 4, [3, 0, 5, 3], logits))
    assert calls == [3]  # the three sampled rows in one op, the greedy row by argmax
    assert together[1] == int(np.argmax(np.array(logits[1])))
    for i in (0, 2, 3):  # a row alone draws the same token (its key: seed and step)
        alone = sampling.sample_rows([samplers[i]], [[1, 2]], [[3, 0, 5, 3][i]],
                                     logits[i : i + 1])
        assert int(np.array(alone)[0]) == together[i]


def test_the_switch_draws_each_row_with_mlx_lm_s_sampler(make_engine, monkeypatch) -> None:
    """CpuOptions.sampler = False (BATCHCHAT_NATIVE_SAMPLER=0): the engine's rows are drawn
    by mlx-lm's sampler a row at a time; a seeded request still reproduces itself."""
    from engine.cpu_options import CpuOptions
    from engine.sampling import batched_draw
    from engine.sampling_params import SamplingParams
    from tests.engine.conftest import run_to_end

    monkeypatch.setattr(native, "sample_tokens", lambda *a, **k: pytest.fail("native used"))
    assert not batched_draw(CpuOptions(sampler=False)) and batched_draw(CpuOptions())
    answers = []
    for _ in range(2):
        engine = make_engine(cpu=CpuOptions(sampler=False))
        params = SamplingParams(max_tokens=6, temperature=0.9, top_p=0.9, seed=5)
        streams = [engine.submit(prompt_tokens=[3, 4, 5 + i], params=params) for i in range(3)]
        run_to_end(engine)
        answers.append([s.tokens for s in streams])
    assert answers[0] == answers[1] and all(len(t) == 6 for t in answers[0])


def test_device_sampler_draws_the_native_samplers_tokens() -> None:
    """Same contract, same tokens: a request sampled on a GPU draws what the CPU draws from
    the same logits (up to float rounding at a cut, which these draws do not meet)."""
    rng = np.random.default_rng(11)
    b, v = 64, 4096
    logits = rng.normal(0, 2.5, (b, v)).astype(np.float32)
    logits[::4] = np.round(logits[::4])  # ties
    grid = [[0.7, 0.95, 0.05, 0], [1.0, 0.0, 0.0, 0], [1.3, 0.5, 0.0, 0], [0.8, 0.0, 0.1, 0],
            [1.0, 0.0, 0.0, 7], [0.7, 0.9, 0.02, 40], [0.5, 0.99, 0.0, 0], [2.0, 0.0, 0.3, 3]]
    params = mx.array(np.array([grid[i % len(grid)] for i in range(b)], dtype=np.float32))
    for seed in range(3):
        u = mx.array(np.random.default_rng(seed).random(b).astype(np.float32))
        want = np.array(native.sample_tokens(mx.array(logits), u, params))
        got = np.array(device_sampler.sample_tokens(mx.array(logits), u, params))
        assert got.tolist() == want.tolist()


def test_on_a_gpu_the_engine_draws_rows_in_one_graph(monkeypatch) -> None:
    """sample_rows on a non-CPU default device uses device_sampler for all sampled rows
    (native.sample_tokens is never called), and each row draws what it draws alone."""
    from engine import sampling
    from engine.sampling_params import SamplingParams

    monkeypatch.setattr(sampling.mx, "default_device", lambda: mx.gpu)
    monkeypatch.setattr(native, "sample_tokens", lambda *a, **k: pytest.fail("native used"))
    calls: list[int] = []
    real = device_sampler.sample_tokens
    monkeypatch.setattr(device_sampler, "sample_tokens",
                        lambda logits, *a: calls.append(logits.shape[0]) or real(logits, *a))
    rng = np.random.default_rng(5)
    logits = mx.array(rng.normal(0, 2, (3, 500)).astype(np.float32))
    samplers = [sampling.RowSampler(SamplingParams(temperature=0.7, top_p=0.95, min_p=0.05,
                                                   repetition_penalty=1.1), 21 + i)
                for i in range(3)]
    together = np.array(sampling.sample_rows(samplers, [[4, 9, 4]] * 3, [2, 7, 0], logits))
    assert calls == [3]
    for i in range(3):
        alone = sampling.sample_rows([samplers[i]], [[4, 9, 4]], [[2, 7, 0][i]],
                                     logits[i : i + 1])
        assert int(np.array(alone)[0]) == together[i]


def test_the_repetition_penalty_inside_the_op_draws_what_the_mlx_ops_give() -> None:
    """sample_tokens' penalty_at / penalty / pending (issue #48: the gather, scaling and
    scatter of penalize_rows were MLX ops on one stream's critical path): over a grid of u,
    every row draws the token it draws from penalize_rows' logits, with and without a pending
    token, for rows with other penalties, windows, short or no history (and a repeated
    token); the penalty really moves the draws; the logits given stay as they were."""
    from engine.sampling import RowSampler, penalize_rows, penalty_table
    from engine.sampling_params import SamplingParams

    rng = np.random.default_rng(8)
    logits = mx.array(rng.normal(0, 2, (5, 300)).astype(np.float32))
    before = np.array(logits)
    samplers = [RowSampler(SamplingParams(temperature=0.7, top_p=0.95, min_p=0.05,
                                          repetition_penalty=1.1), 1),
                RowSampler(SamplingParams(temperature=0.7), 2),  # no penalty
                RowSampler(SamplingParams(temperature=1.0, repetition_penalty=1.8,
                                          repetition_context_size=5), 3),
                RowSampler(SamplingParams(temperature=0.7, top_k=20,
                                          repetition_penalty=1.1), 4),
                RowSampler(SamplingParams(temperature=0.7, repetition_penalty=0.9), 5)]
    top = np.argsort(-before, axis=1)[:, :12]  # histories of each row's likeliest tokens
    histories = [[int(t) for t in top[i][:n]] for i, n in enumerate((12, 6, 9, 0, 3))]
    histories[0][:5] = [int(top[0][0])] * 4 + [int(top[0][1])]  # repeats
    pending = mx.array([int(top[i][1]) for i in range(5)], dtype=mx.uint32)
    params = mx.array([s.native_params() for s in samplers], dtype=mx.float32)
    moved = 0
    for last in (None, pending):
        at, factor = penalty_table(samplers, histories, last is not None)
        want_rows = penalize_rows(samplers, histories, logits, last)
        for u0 in np.linspace(0.0, 0.999, 97):
            u = mx.full((5,), float(u0), dtype=mx.float32)
            got = native.sample_tokens(logits, u, params, penalty_at=mx.array(at, mx.int32),
                                       penalty=mx.array(factor, mx.float32), pending=last)
            want = native.sample_tokens(want_rows, u, params)
            plain = native.sample_tokens(logits, u, params)
            assert np.array_equal(np.array(got), np.array(want)), (u0, last is None)
            moved += int((np.array(got) != np.array(plain)).sum())
    assert moved > 0  # the penalty changed some draws
    assert np.array_equal(np.array(logits), before)
    with pytest.raises(ValueError, match="come together"):
        native.sample_tokens(logits, u, params, penalty_at=mx.array(at, mx.int32))
    with pytest.raises(ValueError, match="int32"):
        native.sample_tokens(logits, u, params, penalty_at=mx.array(at, mx.float32),
                             penalty=mx.array(factor, mx.float32))
