"""The CPU kernels: accurate against MLX's own ops, used only where asked, tokens unchanged."""

import sys
import threading

import mlx.core as mx
import pytest
from mlx_lm.models.activations import swiglu as stock_swiglu
from mlx_lm.models.cache import BatchKVCache

from engine import SamplingParams, cpu_kernels, cpu_layers, module_tree, testing
from engine.cpu_options import CpuOptions
from tests.engine.conftest import (
    STAGGERED_LENGTHS,
    prompts,
    reference_tokens,
    run_staggered,
    run_to_end,
)

pytestmark = pytest.mark.skipif(mx.default_device() != mx.cpu,
                                reason="the kernels are installed on the CPU backend only")


def test_exp_is_within_one_ulp_of_mlx_exp():
    mx.random.seed(0)
    x = mx.concatenate([mx.random.uniform(-87.0, 88.0, (500_000,)),
                        mx.random.normal((500_000,)) * 3])
    ref, got = mx.exp(x), cpu_kernels.exp(x)
    rel = mx.abs(got - ref) / ref
    assert mx.max(rel).item() <= 2.0 ** -23  # one unit in the last place
    assert mx.mean((got == ref).astype(mx.float32)).item() > 0.8
    edges = mx.array([-mx.inf, mx.inf, 0.0, -0.0, -100.0, 100.0, -88.5, 1.0])
    assert cpu_kernels.exp(edges).tolist() == mx.exp(edges).tolist()
    assert mx.isnan(cpu_kernels.exp(mx.array([mx.nan]))).item()


def test_swiglu_and_softmax_match_mlx():
    mx.random.seed(1)
    gate, up = mx.random.normal((3, 5, 700)) * 6, mx.random.normal((3, 5, 700))
    assert mx.allclose(cpu_kernels.swiglu(gate, up), stock_swiglu(gate, up),
                       rtol=1e-6, atol=1e-6).item()
    # Gates far out on either side: no overflow to NaN, and the limits are exact.
    edge = mx.array([-1e4, -200.0, -90.0, 90.0, 200.0, 1e4] * 1000)
    ones = mx.ones_like(edge)
    assert cpu_kernels.swiglu(edge, ones).tolist() == stock_swiglu(edge, ones).tolist()
    scores = mx.random.normal((4, 3, 250)) * 8
    scores = mx.where(mx.random.uniform(shape=scores.shape) < 0.2, -mx.inf, scores)
    probs = cpu_kernels.softmax(scores)
    assert mx.allclose(probs, mx.softmax(scores, axis=-1, precise=True),
                       rtol=1e-6, atol=1e-7).item()
    assert mx.all(mx.where(mx.isinf(scores), probs == 0, True)).item()
    assert mx.allclose(probs.sum(-1), mx.ones((4, 3)), atol=1e-6).item()


def _left_padded_cache(rows: int, n_kv: int, dim: int, lengths: list[int]) -> BatchKVCache:
    width = max(lengths)
    cache = BatchKVCache([width - n for n in lengths])
    kv = mx.random.normal((rows, n_kv, width, dim))
    cache.update_and_fetch(kv, kv)
    return cache


@pytest.mark.parametrize("n_heads,n_kv", [(9, 3), (4, 4)])
def test_attention_matches_mlx_sdpa_for_every_mask_kind(n_heads, n_kv):
    mx.random.seed(2)
    dim, rows = 16, 3
    sdpa = mx.fast.scaled_dot_product_attention

    def check(q, k, v, mask):
        want = sdpa(q, k, v, scale=0.25, mask=mask)
        got = cpu_kernels.attention(q, k, v, 0.25, mask)
        assert got.shape == want.shape
        assert mx.allclose(got, want, rtol=1e-5, atol=1e-6).item(), mask

    # Batched decode: left-padded histories and the cache's own boolean mask.
    cache = _left_padded_cache(rows, n_kv, dim, [40, 7, 25])
    q = mx.random.normal((rows, n_heads, 1, dim))
    k_new = mx.random.normal((rows, n_kv, 1, dim))
    mask = cache.make_mask(1, return_array=True)
    k, v = cache.update_and_fetch(k_new, k_new * 2)
    check(q, k, v, mask)
    # Prefill: causal over the whole prompt, and a chunk after 30 cached tokens.
    for length, total in ((50, 50), (20, 50)):
        q = mx.random.normal((rows, n_heads, length, dim))
        k = mx.random.normal((rows, n_kv, total, dim))
        v = mx.random.normal((rows, n_kv, total, dim))
        check(q, k, v, "causal")
        check(q, k, v, None)
        additive = mx.random.normal((1, n_heads, length, total))  # per-head, added to scores
        check(q, k, v, additive)


def test_dispatch_is_scoped_to_the_active_thread(tiny, monkeypatch):
    # the compiled kernels, not the native op (tests/engine/test_native_rowwise.py)
    options = CpuOptions(rowwise=False)
    module = sys.modules[type(tiny.model).__module__]
    tree = module_tree.clone(tiny.model)
    assert cpu_layers.install(tree) and cpu_layers.install(tree)  # idempotent
    mlp = tree.model.layers[0].mlp
    assert type(mlp).__mro__[1] is module.MLP  # routed once, not twice
    # the engine's own copy: the loaded model and mlx-lm's module are as they were
    assert type(tiny.model.model.layers[0].mlp) is module.MLP
    assert module.swiglu is stock_swiglu
    dispatch = type(mlp).__call__.__globals__["swiglu"]
    calls = []
    fast = cpu_kernels.swiglu
    monkeypatch.setattr(cpu_kernels, "swiglu", lambda g, u: calls.append(1) or fast(g, u))
    gate, up = mx.random.normal((8, 1, 1024)), mx.random.normal((8, 1, 1024))

    # Not active: exactly the stock function, bit for bit.
    assert mx.array_equal(dispatch(gate, up), stock_swiglu(gate, up)).item()
    assert not calls
    with cpu_kernels.active(options):
        dispatch(gate, up)
        assert len(calls) == 1
        other = threading.Thread(target=lambda: dispatch(gate, up))  # not active there
        other.start()
        other.join()
        assert len(calls) == 1
        dispatch(gate[:1, :, :64], up[:1, :, :64])  # too small to pay off: stock
        dispatch(gate.astype(mx.float16), up.astype(mx.float16))  # float32 only
        assert len(calls) == 1
        module.swiglu(gate, up)  # mlx-lm's own function: never the engine's
        assert len(calls) == 1
    dispatch(gate, up)
    assert len(calls) == 1


def _count_fast_calls(monkeypatch) -> list[str]:
    calls: list[str] = []
    for name in ("swiglu", "attention"):
        real = getattr(cpu_kernels, name)
        monkeypatch.setattr(cpu_kernels, name,
                            lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    return calls


def test_engine_tokens_with_the_kernels_equal_mlx_lm_generate(tiny, make_engine, monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_MIN_SIZE", 0)  # the tiny model's tensors take them too
    # the composed attention and compiled SiLU, not the native ops
    # (tests/engine/test_native_attention.py, test_native_rowwise.py)
    calls = _count_fast_calls(monkeypatch)
    engine = make_engine(max_concurrent=6, prefill_burst=8,
                         cpu=CpuOptions(attention=False, rowwise=False))
    ps = prompts(8, seed=5)
    streams = run_staggered(engine, ps)
    assert {"swiglu", "attention"} <= set(calls)
    seen = len(calls)
    for p, n, s in zip(ps, STAGGERED_LENGTHS, streams, strict=True):  # the reference runs stock
        assert s.tokens == reference_tokens(tiny.model, p, n), s.request_id
    assert len(calls) == seen


def test_engine_config_can_turn_the_kernels_off(make_engine, monkeypatch):
    monkeypatch.setattr(cpu_kernels, "_MIN_SIZE", 0)
    calls = _count_fast_calls(monkeypatch)
    engine = make_engine(cpu_kernels=False)
    engine.submit(prompt_tokens=prompts(1)[0], params=SamplingParams(max_tokens=4))
    run_to_end(engine)
    assert not testing.facts(engine).fast_cpu_kernels
    assert calls == []
