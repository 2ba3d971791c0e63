"""Issue #48 (1): the native path for each architecture's own pieces (engine/cpu_arch_layers.py):
Llama 3.x's, YaRN's, Phi-3's and Gemma 4's frequency-table RoPEs, Gemma's RMSNorm of
1 + weight and its GELU-tanh MLP.

Each architecture's engine copy holds none of the stock classes these replace, and its
forward (the engine's row-wise ops and attention, the stock quantized linears) gives the
stock mlx-lm forward's logits on the same weights within a tolerance stated below. The
same-answer guarantee per architecture (batched, chunked, cached; Llama 3.x's RoPE among
them) is tests/engine/test_gguf_architectures.py's.
"""

from __future__ import annotations

from contextlib import nullcontext

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx_lm.models import rope_utils
from mlx_lm.models.cache import make_prompt_cache

from engine import cpu_arch_layers, cpu_kernels, cpu_layers, model_fixes, module_tree, native
from engine.cpu_options import CpuOptions
from tests.gguf_models import CASES, build_model

pytestmark = pytest.mark.usefixtures("native_built")

# architecture -> the stock classes the engine's copy must hold none of
COVERED = {
    "llama": ("RoPE", "RMSNorm"),
    "llama3": ("Llama3RoPE", "RMSNorm"),
    "qwen2": ("RoPE", "RMSNorm"),
    "granite": ("RoPE", "RMSNorm"),
    "olmo2": ("RoPE", "RMSNorm"),
    "phi3": ("RoPE", "RMSNorm"),
    "qwen3": ("RoPE", "RMSNorm"),
    "gemma3": ("RoPE", "gemma3_text.RMSNorm", "gemma3_text.MLP"),
    "gemma2": ("RoPE", "gemma2.RMSNorm", "gemma2.MLP", "gemma2.Attention"),
    "mistral3": ("YarnRoPE", "RMSNorm"),
    "phi3-longrope": ("SuScaledRoPE", "RMSNorm"),
    "gemma4": ("ProportionalRoPE", "gemma4_text.MLP", "RMSNormNoScale"),
    "smollm3": ("RoPE", "RMSNorm"),
    "gpt-oss": ("YarnRoPE", "RMSNorm"),
    "qwen3moe": ("RoPE", "RMSNorm", "SwiGLU"),
    "gemma4-moe": ("ProportionalRoPE", "gemma4_text.MLP", "RMSNormNoScale", "GeGLU"),
}
IDS = [1, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 3, 5, 7, 9, 11, 13, 200]


def _stock_names(tree: nn.Module) -> set[str]:
    """The classes of `tree` from mlx / mlx-lm (or engine/model_fixes.py's subclasses of
    theirs, which run their code), as 'Name' and 'module.Name'."""
    names = set()
    for _, m in tree.named_modules():
        cls = type(m)
        if cls.__module__.startswith(("mlx.", "mlx_lm.", "engine.model_fixes")):
            names |= {cls.__name__, f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"}
    return names


def engine_copy(model: nn.Module) -> nn.Module:
    """The engine's copy with its row-wise ops and attention (ModelRunner's first steps;
    the linears stay the stock quantized ones, so only the layers under test differ)."""
    tree = module_tree.clone(model)
    model_fixes.install(tree)
    assert cpu_layers.install(tree)
    return tree


@pytest.mark.parametrize("name", sorted(COVERED))
def test_each_architectures_native_path_gives_the_stock_forward(name: str, monkeypatch) -> None:
    """Prompt logits, then four decode steps on a KV cache (positions past the prompt), of
    the engine's copy inside an engine pass against mlx-lm's model on the same 4-bit
    weights. Tolerance: 2e-4 of the logits' range. Every replaced piece is float32 but not
    bit-identical to MLX's composition (the native attention's and RMSNorm's sums in
    another order, GELU through exp where MLX takes tanh, ~1e-7 relative each); through a
    tiny random model's layers that grows to ~1e-5 of the range; a wrong rotation, norm
    weight or activation moves logits by 1e-2 or more."""
    case = CASES[name]
    model = build_model(case, seed=4)
    nn.quantize(model, group_size=32, bits=4, class_predicate=lambda _, m: (
        isinstance(m, nn.Linear) and m.weight.shape[-1] % 32 == 0))
    mx.eval(model.parameters())
    tree = engine_copy(model)
    assert not _stock_names(tree) & set(COVERED[name]), _stock_names(tree)
    # the loaded model is untouched: mlx / mlx-lm's classes only
    assert all(type(m).__module__.startswith(("mlx.", "mlx_lm.")) for _, m in model.named_modules())

    def run(m: nn.Module, active: bool) -> list[np.ndarray]:
        cache = make_prompt_cache(m)
        outs = []
        with cpu_kernels.active(CpuOptions()) if active else nullcontext():
            outs.append(np.array(m(mx.array([IDS]), cache=cache)))
            for token in (7, 90, 33, 5):
                outs.append(np.array(m(mx.array([[token]]), cache=cache)))
        return outs

    # every RoPE native, or one that rotates nothing: a tick's rows and chunks may share a
    # pass (where the attention is the dispatcher's: not Gemma 2's own softcapped one)
    assert cpu_layers.supports_ragged(tree, CpuOptions()) is (name != "gemma2")
    sunk, capped = [], []
    if name == "gpt-oss":  # its attention sinks reach the native kernel
        monkeypatch.setattr(native, "cache_attention", _recording(native.cache_attention, sunk))
    real_softcap = native.softcap
    monkeypatch.setattr(native, "softcap",
                        lambda *a, **k: capped.append(a[1]) or real_softcap(*a, **k))
    want, got = run(model, False), run(tree, True)
    for step, (w, g) in enumerate(zip(want, got, strict=True)):
        span = np.abs(w).max()
        assert np.abs(g - w).max() <= 2e-4 * span, (step, np.abs(g - w).max() / span)
    assert (len(sunk) == 2 * len(got)) if name == "gpt-oss" else not sunk
    # a tied Gemma 2 / 4's final soft-capping: native in every pass, prompt and decode
    cap = getattr(model, "final_logit_softcapping", None)
    assert capped == ([cap] * len(got) if name.startswith("gemma") and cap else []), capped


def _recording(fn, seen: list):
    def call(*args, **kwargs):
        if kwargs.get("sinks") is not None:
            seen.append(kwargs["sinks"])
        return fn(*args, **kwargs)
    return call


def test_freqs_ropes_give_mx_fast_ropes_rotation() -> None:
    """Llama3RoPE and YaRN (with its input scale) as one native op, per-row offsets and a
    ragged pass's per-token positions: within the rotation's rounding bound of the stock
    op (test_native_rowwise's), the YaRN scale applied by the same op as stock."""
    from engine.ragged_pass import Positions
    from tests.engine.test_native_rowwise import _rope_bound

    llama3 = rope_utils.Llama3RoPE(64, 4096, False, 500000.0,
                                   {"factor": 32.0, "original_max_position_embeddings": 8192})
    yarn = rope_utils.YarnRoPE(64, max_position_embeddings=32768, base=1e6, scaling_factor=16,
                               original_max_position_embeddings=16, mscale=1.0,
                               mscale_all_dim=0.0)
    x = mx.random.normal((2, 9, 4, 64)).transpose(0, 2, 1, 3)  # (B, heads, T, D) view
    offset = mx.array([4, 300])
    for stock in (llama3, yarn):
        ours = cpu_arch_layers.engine_class(type(stock))
        assert ours is not None and issubclass(ours, type(stock))
        mod = module_tree.adopt(stock, ours)
        want = np.array(stock(x, offset=offset))
        outside = np.array(mod(x, offset=offset))  # outside an engine pass: the stock op
        assert np.array_equal(outside, want)
        with cpu_kernels.active(CpuOptions()):
            got = np.array(mod(x, offset=offset))
        scaled = x * yarn.mscale if stock is yarn else x
        assert np.all(np.abs(got - want) <= _rope_bound(scaled, 64, False)), type(stock)
        # a ragged pass: (1, H, T, D) tokens at their own positions = each alone
        tokens = mx.concatenate([x[:1, :, :2], x[1:, :, :3]], axis=2)
        positions = Positions(mx.array([4, 5, 300, 301, 302]))
        with cpu_kernels.active(CpuOptions()):
            ragged = np.array(mod(tokens, offset=positions))
            alone = [np.array(mod(x[b:b + 1, :, t:t + 1], offset=int(o)))
                     for b, t, o in ((0, 0, 4), (0, 1, 5), (1, 0, 300), (1, 1, 301),
                                     (1, 2, 302))]
        assert np.array_equal(ragged, np.concatenate(alone, axis=2))


@pytest.mark.parametrize("shape", [(1, 1, 2816), (8, 1, 2816), (3, 37), (1, 8203)])
def test_gelu_tanh_mul_is_gelu_approx_times_up_and_row_invariant(shape) -> None:
    """Against nn.gelu_approx(g) * u: |difference| <= 2.5e-7 |g u| (MLX's 0.5 x (1 + tanh)
    loses the negative tail to cancellation, 1 + tanh being rounded to 6e-8; a few ulps
    elsewhere). The portable loop and the AVX2 one give the same bits, so a row's result is
    the same alone, in a batch, or at any offset into the array."""
    mx.random.seed(shape[-1])
    g = mx.random.normal(shape) * 4
    u = mx.random.normal(shape)
    got = np.array(native.gelu_tanh_mul(g, u))
    want = np.array(nn.gelu_approx(g) * u)
    assert np.all(np.abs(got - want) <= 2.5e-7 * np.abs(np.array(g) * np.array(u)))
    assert np.array_equal(got, np.array(native.gelu_tanh_mul(g, u, force_scalar=True)))
    flat_g, flat_u = g.reshape(-1), u.reshape(-1)
    tail = np.array(native.gelu_tanh_mul(flat_g[5:], flat_u[5:]))  # another alignment
    assert np.array_equal(tail, got.reshape(-1)[5:])
    edges = mx.array([-1e4, -100.0, -20.0, 0.0, 20.0, 100.0, 1e4, float("inf")])
    assert np.array_equal(np.array(native.gelu_tanh_mul(edges, mx.ones(8))),
                          np.array(nn.gelu_approx(edges)))


def test_gemma_norm_follows_a_new_weight() -> None:
    """1 + weight is kept, but only while the weight is the same array."""
    from mlx_lm.models import gemma3_text

    stock = gemma3_text.RMSNorm(16)
    mod = module_tree.adopt(stock, cpu_arch_layers.engine_class(gemma3_text.RMSNorm))
    x = mx.random.normal((2, 16))
    with cpu_kernels.active(CpuOptions()):
        first = np.array(mod(x))
        mod.weight = mx.full((16,), 0.5)
        second = np.array(mod(x))
    assert np.allclose(first, np.array(stock(x)), atol=1e-6)
    assert np.allclose(second, np.array(mx.fast.rms_norm(x, 1.5 * mx.ones(16), 1e-5)),
                       atol=1e-6)


@pytest.mark.parametrize("tiled_from", [1, 0, 16], ids=["tiled", "two-pass", "variant"])
@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "scalar"])
def test_softcapped_attention_is_gemma2s_and_row_invariant(tiled_from: int, scalar: bool) -> None:
    """cache_attention's softcap against Gemma 2's own composed attention (scores capped,
    then the boolean mask): within 2e-6 (float32 sums in another order, tanh through exp);
    without the cap the outputs differ by ~1, so the cap is applied. A batch row's output
    equals the row alone (the tiled kernel's invariance holds with the cap)."""
    mx.random.seed(tiled_from + scalar)
    b, hq, hkv, n, t, d, cap = 3, 8, 2, 3, 77, 128, 5.0
    q, k, v = (mx.random.normal(s) for s in ((b, hq, n, d), (b, hkv, t, d), (b, hkv, t, d)))
    scale = 3 * d ** -0.5
    mask = mx.broadcast_to(mx.arange(t)[None, None, None] <= (t - n + mx.arange(n))[:, None],
                           (b, 1, n, t))
    grouped = (q * scale).reshape(b, hkv, hq // hkv, n, d) @ mx.expand_dims(k, 2).swapaxes(-1, -2)
    scores = mx.where(mask[:, :, None], mx.tanh(grouped / cap) * cap, mx.finfo(mx.float32).min)
    want = np.array((mx.softmax(scores, axis=-1, precise=True) @ mx.expand_dims(v, 2))
                    .reshape(b, hq, n, d))
    got = np.array(native.cache_attention(q, k, v, scale, mask, softcap=cap,
                                          tiled_from=tiled_from, force_scalar=scalar))
    assert np.abs(got - want).max() <= 2e-6
    plain = np.array(native.cache_attention(q, k, v, scale, mask, tiled_from=tiled_from))
    assert np.abs(plain - want).max() > 0.1
    if tiled_from == 1 and not scalar:
        alone = np.array(native.cache_attention(q[1:2], k[1:2], v[1:2], scale, mask[1:2],
                                                softcap=cap))
        assert np.array_equal(alone[0], got[1])
    with pytest.raises(ValueError, match="additive"):
        native.cache_attention(q, k, v, scale, mx.zeros((b, 1, n, t)), softcap=cap)


@pytest.mark.parametrize("cap", [30.0, 5.0])
def test_native_softcap_is_stock_tanh_and_row_invariant(cap: float) -> None:
    """native.softcap against mx.tanh(x / cap) * cap (Gemma 2 / 4's final logit
    soft-capping): within 4e-7 * cap (tanh as 1 - 2 / (1 + exp(2y)): about one ulp of cap
    near 0, where MLX's tanh is exact to its own ulp); the edges (+-inf, +-1e4) give +-cap.
    The portable loop and the AVX2 one give the same bits, so a row alone (any offset)
    gives its row of the batch."""
    mx.random.seed(int(cap))
    x = mx.random.normal((5, 32003)) * 2 * cap
    want = np.array(mx.tanh(x / cap) * cap)
    got = np.array(native.softcap(x, cap))
    assert np.abs(got - want).max() <= 4e-7 * cap
    assert np.abs(got - want).max() > 0 or cap == 5.0  # not the stock op itself
    assert np.array_equal(got, np.array(native.softcap(x, cap, force_scalar=True)))
    assert np.array_equal(np.array(native.softcap(x[3:4, 7:], cap))[0], got[3, 7:])
    edges = mx.array([-float("inf"), -1e4, 1e4, float("inf")])
    assert np.array_equal(np.array(native.softcap(edges, cap)), [-cap, -cap, cap, cap])
    wrong = np.array(mx.tanh(x / (2 * cap)) * 2 * cap)  # another cap is far off
    assert np.abs(wrong - want).max() > 1.0


@pytest.mark.parametrize("name", ["gemma2", "gemma4"])
def test_a_softcapped_tied_head_is_found_so_chunks_skip_other_positions_logits(
        name, monkeypatch) -> None:
    """Gemma 2/4 cap their logits after the tied embedding's as_linear: the engine's copy
    gets that head as its lm_head (no parameters: the same names as the loaded model), so
    ModelRunner's output head is found (a prompt chunk's logits for its last position
    only); its logits are the model's own (within 1e-5 of their range: this float model's
    matmuls are BLAS's, whose rounding depends on the row count; the engine's quantized
    ones are the same for any rows). Inside an engine pass the soft-capping is one
    native.softcap, within its bound of the stock tanh. The loaded model stays as it was."""
    from mlx.utils import tree_flatten

    from engine.model_runner import ModelRunner

    model = build_model(CASES[name], seed=4)
    runner = ModelRunner(model)
    assert runner.head is not None and "lm_head" not in model
    assert ([k for k, _ in tree_flatten(runner.model.parameters())]
            == [k for k, _ in tree_flatten(model.parameters())])
    ids = mx.array([IDS])
    whole = np.array(runner.model(ids)[:, -1])
    last = np.array(runner.head(runner.model.model(ids)[:, -1:])[:, 0])
    assert np.abs(whole - last).max() <= 1e-5 * np.abs(whole).max()
    # inside an engine pass the head's soft-capping is native.softcap (within its bound)
    capped = []
    real = native.softcap
    monkeypatch.setattr(native, "softcap", lambda *a, **k: capped.append(a[1]) or real(*a, **k))
    with cpu_kernels.active(runner.cpu):
        hidden = runner.model.model(ids)[:, -1:]
        passed = np.array(runner.head(hidden)[:, 0])
    monkeypatch.setattr(native, "softcap", real)
    stock = np.array(runner.head(hidden)[:, 0])  # outside a pass: the stock tanh
    cap = capped[0] if capped else None
    if name == "gemma2" or runner.model.final_logit_softcapping is not None:
        assert capped == [cap] and cap > 0
        assert np.abs(passed - stock).max() <= 4e-7 * cap
    else:
        assert not capped and np.array_equal(passed, stock)


@pytest.mark.parametrize("tiled_from", [1, 0], ids=["tiled", "two-pass"])
@pytest.mark.parametrize("scalar", [False, True], ids=["simd", "scalar"])
def test_attention_sinks_are_mx_fast_sdpas_and_row_invariant(tiled_from: int, scalar: bool) -> None:
    """cache_attention's sinks (gpt-oss) against mx.fast.scaled_dot_product_attention's,
    boolean and causal masks: within 1e-6 (sums in another order); without them
    > 0.05 apart. A batch row's output equals the row alone."""
    mx.random.seed(7 + tiled_from + scalar)
    b, hq, hkv, n, t, d = 2, 8, 2, 3, 77, 64
    q, k, v = (mx.random.normal(s) for s in ((b, hq, n, d), (b, hkv, t, d), (b, hkv, t, d)))
    sinks = 4 + mx.random.normal((hq,))  # a sink that takes a good share of each row
    mask = mx.broadcast_to(mx.arange(t)[None, None, None] <= (t - n + mx.arange(n))[:, None],
                           (b, 1, n, t))
    for m in (mask, "causal"):
        want = np.array(mx.fast.scaled_dot_product_attention(q, k, v, scale=d ** -0.5, mask=m,
                                                             sinks=sinks))
        got = np.array(native.cache_attention(q, k, v, d ** -0.5, m, sinks=sinks,
                                              tiled_from=tiled_from, force_scalar=scalar))
        assert np.abs(got - want).max() <= 1e-6
    plain = np.array(native.cache_attention(q, k, v, d ** -0.5, "causal", tiled_from=tiled_from))
    assert np.abs(plain - want).max() > 0.05
    alone = np.array(native.cache_attention(q[1:], k[1:], v[1:], d ** -0.5, "causal",
                                            sinks=sinks, tiled_from=tiled_from,
                                            force_scalar=scalar))
    assert np.array_equal(alone[0], got[1])


# ---- MoE experts grouped by expert on the packed kernel (issue #48 (3)) ----

MOE = ["qwen3moe", "gpt-oss", "gemma4-moe", "qwen35moe"]


def _experts(e: int, n: int, k: int, bits: int, gs: int, seed: int):
    """Random stacked experts in MLX's affine layout (any group size: groups of 16 too)."""
    rng = np.random.default_rng(seed)
    q = mx.array(rng.integers(0, 2**32, (e, n, k * bits // 32), dtype=np.uint32))
    s = mx.array(rng.uniform(0.001, 0.02, (e, n, k // gs)).astype(np.float32))
    b = mx.array(rng.uniform(-0.1, 0.1, (e, n, k // gs)).astype(np.float32))
    return q, s, b


def _each_pair_alone(x, idx, q, s, b, gs, bits, scalar=False) -> np.ndarray:
    """(M, k, N): each (row, slot) pair through the dense packed kernel, its row alone, on its
    expert's own pack_quantized copy: what the grouped op must give bit for bit."""
    m, rows, _ = x.shape
    k = idx.shape[1]
    packs = {}
    out = np.zeros((m, k, q.shape[1]), np.float32)
    for i in range(m):
        for j in range(k):
            e = int(idx[i, j].item())
            pk = packs.setdefault(e, native.pack_quantized(q[e], s[e], b[e], gs, bits))
            row = x[i, 0 if rows == 1 else j][None]
            out[i, j] = np.array(native.packed_matvec_many(row, [pk], [q.shape[1]], gs, bits,
                                                           force_scalar=scalar)[0])[0]
    return out


@pytest.mark.parametrize(("bits", "gs", "n", "k"), [(4, 32, 40, 96), (8, 64, 48, 128),
                                                    (4, 16, 33, 64), (8, 16, 16, 32)])
@pytest.mark.parametrize("per_slot", [False, True], ids=["shared-x", "x-per-slot"])
def test_experts_grouped_give_each_pair_its_rows_bits_alone(bits, gs, n, k, per_slot) -> None:
    """packed_experts_matvec against each (row, expert) pair run alone on the dense packed
    kernel: bit-equal (the grouping, the sort and the scatter add nothing to a pair's
    arithmetic), on the SIMD and the portable paths, two outputs (gate, up) in one op; a row
    alone gives its row of the batch; an expert out of range gives zeros. Against mlx-lm's
    stock op (mx.gather_qmm, float32 x): within the int8 rounding bound of each pair
    (test_native_qmv's _int8_bound), as every packed linear of the engine."""
    from tests.engine.test_native_qmv import _int8_bound

    e, m, used = 6, 9, 3
    q, s, b = _experts(e, n, k, bits, gs, seed=bits + gs + n)
    q2, s2, b2 = _experts(e, 24, k, bits, gs, seed=1)
    mx.random.seed(n + per_slot)
    x = mx.random.normal((m, used if per_slot else 1, k))
    rng = np.random.default_rng(k)
    idx = mx.array(np.stack([rng.permutation(e)[:used] for _ in range(m)]), dtype=mx.uint32)
    packed = [native.pack_experts(q, s, b, gs, bits), native.pack_experts(q2, s2, b2, gs, bits)]
    for scalar in (False, True):
        got, got2 = (np.array(o) for o in native.packed_experts_matvec(
            x, idx, packed, [n, 24], e, gs, bits, force_scalar=scalar))
        assert np.array_equal(got, _each_pair_alone(x, idx, q, s, b, gs, bits, scalar))
        assert np.array_equal(got2, _each_pair_alone(x, idx, q2, s2, b2, gs, bits, scalar))
        if not scalar:
            simd_out = got
    assert np.array_equal(simd_out, got)  # the portable loop's bits are the SIMD ones
    for i in (0, 4, 8):
        alone = native.packed_experts_matvec(x[i:i + 1], idx[i:i + 1], packed[:1], [n], e,
                                             gs, bits)[0]
        assert np.array_equal(np.array(alone)[0], got[i])
    if gs != 16:  # MLX's quantized kernels take groups of 32 and up
        # mlx-lm's stock call (gather_qmm on float32 x): within the int8 rounding bound
        stock = np.array(mx.gather_qmm(x[:, :, None], q, s, b, rhs_indices=idx, transpose=True,
                                       group_size=gs, bits=bits))[:, :, 0]
        for j in range(used):
            for i in range(m):
                ex = int(idx[i, j].item())
                row = x[i:i + 1, j if per_slot else 0]
                _, bound = _int8_bound(row, q[ex], s[ex], b[ex], gs, bits)
                assert np.all(np.abs(got[i, j] - stock[i, j]) <= bound[0])
    wild = mx.array(np.where(np.arange(m * used).reshape(m, used) == 4, e + 3,
                             np.array(idx)), dtype=mx.uint32)
    out = np.array(native.packed_experts_matvec(x, wild, packed[:1], [n], e, gs, bits)[0])
    assert not out[1, 1].any() and np.array_equal(out[0], got[0])


def _fma_slots(pairs: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(..., N) float32: each row's k pairs (..., k, N) summed in slot order as
    acc = fma(w[..., j], pair j, acc) from 0 (src/packed.h's kWeightedSum): the product is
    exact in float64 and the sum rounded once more to float32 (a double rounding could
    differ only at an exact float32 tie)."""
    acc = np.zeros(pairs.shape[:-2] + pairs.shape[-1:], np.float32)
    for j in range(pairs.shape[-2]):
        acc = (w[..., j, None].astype(np.float64) * pairs[..., j, :].astype(np.float64)
               + acc.astype(np.float64)).astype(np.float32)
    return acc


@pytest.mark.parametrize(("bits", "gs", "n", "k"), [(4, 32, 64, 96), (8, 64, 48, 128),
                                                    (4, 16, 36, 64)])
def test_experts_swiglu_and_weighted_sum_on_the_way_out(bits, gs, n, k) -> None:
    """packed_experts_matvec's outputs after the pairs (src/packed.h's ExpertsOut), on the
    SIMD and the portable paths: out 1 is native.silu_mul (of the same path) of each pair's
    gate and up rows bit for bit (N a multiple of 8 or not); out 2 is each row's k pairs
    summed in slot order by fma, weighted by slot_weights, bit for bit, a pair without an
    expert counting zeros, and a row alone gives its row of the batch."""
    e, m, used = 6, 9, 3
    gate, up = (native.pack_experts(*_experts(e, n, k, bits, gs, seed=i), gs, bits)
                for i in (0, 1))
    # down's K is n: whole 32-blocks only (else only the SwiGLU output is checked)
    down = native.pack_experts(*_experts(e, k, n, bits, gs, seed=2), gs, bits) \
        if n % 32 == 0 else None
    mx.random.seed(n)
    x = mx.random.normal((m, 1, k))
    rng = np.random.default_rng(k)
    idx = mx.array(np.stack([rng.permutation(e)[:used] for _ in range(m)]), dtype=mx.uint32)
    weights = mx.softmax(mx.random.normal((m, used)), axis=-1)
    for scalar in (False, True):
        g, u = native.packed_experts_matvec(x, idx, [gate, up], [n, n], e, gs, bits,
                                            force_scalar=scalar)
        (act,) = native.packed_experts_matvec(x, idx, [gate, up], [n, n], e, gs, bits,
                                              force_scalar=scalar, out=1)
        assert act.shape == (m, used, n)
        each = mx.stack([mx.stack([native.silu_mul(g[i, j], u[i, j], force_scalar=scalar)
                                   for j in range(used)]) for i in range(m)])
        assert mx.array_equal(act, each).item()  # each pair's row alone
        if down is None:
            continue
        h = act
        pairs = native.packed_experts_matvec(h, idx, [down], [k], e, gs, bits,
                                             force_scalar=scalar)[0]
        (y,) = native.packed_experts_matvec(h, idx, [down], [k], e, gs, bits,
                                            force_scalar=scalar, out=2, slot_weights=weights)
        assert y.shape == (m, k)
        assert np.array_equal(np.array(y), _fma_slots(np.array(pairs), np.array(weights)))
        for i in (0, 5):
            (alone,) = native.packed_experts_matvec(h[i:i + 1], idx[i:i + 1], [down], [k], e,
                                                    gs, bits, force_scalar=scalar, out=2,
                                                    slot_weights=weights[i:i + 1])
            assert mx.array_equal(alone[0], y[i]).item()
    wild = mx.array(np.where(np.arange(m * used).reshape(m, used) == 4, e + 3,
                             np.array(idx)), dtype=mx.uint32)
    if down is not None:
        pairs = np.array(native.packed_experts_matvec(act, wild, [down], [k], e, gs, bits)[0])
        (y,) = native.packed_experts_matvec(act, wild, [down], [k], e, gs, bits, out=2,
                                            slot_weights=weights)
        assert not pairs[1, 1].any()
        assert np.array_equal(np.array(y), _fma_slots(pairs, np.array(weights)))
    with pytest.raises(ValueError, match="slot_weights"):
        native.packed_experts_matvec(x, idx, [gate], [n], e, gs, bits, out=0,
                                     slot_weights=weights)
    with pytest.raises(ValueError, match="out must be"):
        native.packed_experts_matvec(x, idx, [gate], [n], e, gs, bits, out=1)


@pytest.mark.parametrize("normalise", [True, False], ids=["normalised", "softmax"])
@pytest.mark.parametrize(("e", "k"), [(32, 4), (8, 2), (128, 8)])
def test_moe_route_is_the_stock_routing_in_one_op(e: int, k: int, normalise: bool) -> None:
    """native.moe_route (src/moe_route.h) against mlx-lm's Qwen 3 MoE routing (precise
    softmax, argpartition, take, the scores normalised): the same experts, largest first,
    scores within float32 rounding; a row alone gives its row of a batch bit for bit; ties
    go to the lower index."""
    mx.random.seed(e + k)
    logits = mx.random.normal((3, 7, e)) * 4
    inds, scores = native.moe_route(logits, k, normalise)
    assert inds.dtype == mx.uint32 and scores.dtype == mx.float32
    assert inds.shape == scores.shape == (3, 7, k)
    gates = mx.softmax(logits, axis=-1, precise=True)
    want_i = mx.argpartition(gates, kth=-k, axis=-1)[..., -k:]
    want_s = mx.take_along_axis(gates, want_i, axis=-1)
    if normalise:
        want_s = want_s / mx.sum(want_s, axis=-1, keepdims=True)
    order = np.argsort(-np.array(want_s), axis=-1, kind="stable")
    got_i, got_s = np.array(inds), np.array(scores)
    assert np.array_equal(got_i, np.take_along_axis(np.array(want_i), order, axis=-1))
    assert np.allclose(got_s, np.take_along_axis(np.array(want_s), order, axis=-1),
                       rtol=1e-6, atol=1e-7)
    assert np.all(np.diff(got_s, axis=-1) <= 0)
    for b, t in ((0, 0), (2, 6), (1, 3)):
        i1, s1 = native.moe_route(logits[b, t][None], k, normalise)
        assert mx.array_equal(i1[0], inds[b, t]).item()
        assert mx.array_equal(s1[0], scores[b, t]).item()
    tie_i, _ = native.moe_route(mx.zeros((1, e)), k, normalise)
    assert np.array(tie_i).tolist() == [list(range(k))]
    with pytest.raises(ValueError, match="k must be"):
        native.moe_route(logits, e + 1, normalise)


def _quantized(name: str, seed: int = 4) -> nn.Module:
    model = build_model(CASES[name], seed=seed)
    nn.quantize(model, group_size=32, bits=4, class_predicate=lambda _, m: (
        hasattr(m, "to_quantized") and m.weight.shape[-1] % 32 == 0))
    mx.eval(model.parameters())
    return model


def _run_steps(m: nn.Module, ids: list[list[int]], steps=((7,), (90,), (33,))) -> list[np.ndarray]:
    """Prompt logits, then decode steps (each row the same next token) on a KV cache, in an
    engine pass."""
    cache = make_prompt_cache(m)
    with cpu_kernels.active(CpuOptions()):
        outs = [np.array(m(mx.array(ids), cache=cache))]
        for token in steps:
            outs.append(np.array(m(mx.array([list(token)] * len(ids)), cache=cache)))
    return outs


@pytest.mark.parametrize("name", MOE)
def test_moe_experts_grouped_give_the_forward_of_each_pair_alone(name: str, monkeypatch) -> None:
    """A MoE model's engine copy with its experts grouped by expert (engine/native/
    switch_layers.py; everything else the engine's row-wise layers and the stock linears)
    against the same copy whose experts compute each (row, expert) pair alone on the dense
    packed kernel: the logits are bit-equal, prompt and decode, and every MoE layer ran
    the grouped op (gate and up in one, then down). Against mlx-lm's stock op the experts
    differ by their int8 activations only, as every packed linear of the engine
    (test_experts_grouped_give_each_pair_its_rows_bits_alone: within the int8 bound)."""
    from engine.native import switch_layers

    model = _quantized(name)
    tree = engine_copy(model)
    grouped = module_tree.replace(tree, lambda m: switch_layers.engine_module(m, False))
    kinds = {type(m).__name__ for _, m in tree.named_modules()
             if type(m).__module__ == switch_layers.__name__}
    assert grouped > 0 and kinds == {"SwitchGLU", "QuantizedSwitchLinear"}, kinds
    calls = []

    def recording(members, x, indices, *out):
        calls.append((len(members), out[0] if out else switch_layers.EACH_PAIR))
        return real(members, x, indices, *out)

    real = switch_layers.grouped_call
    monkeypatch.setattr(switch_layers, "grouped_call", recording)
    got = _run_steps(tree, [IDS])
    layers_moe = sum(type(m).__name__ == "SwitchGLU" for _, m in tree.named_modules())
    # gate+up, then down; Qwen 3's block (engine/native/moe_blocks.py) with SwiGLU and its
    # weighted sum in them
    fused = name == "qwen3moe"
    want = [(2, switch_layers.SWIGLU if fused else switch_layers.EACH_PAIR),
            (1, switch_layers.WEIGHTED_SUM if fused else switch_layers.EACH_PAIR)]
    assert calls == want * (layers_moe * len(got))

    def each_alone(members, x, indices, out=switch_layers.EACH_PAIR, slot_weights=None):
        outs = []
        form = switch_layers._pairs(x, indices)
        m, rows, k = form
        xr, ir = x.reshape(m, rows, x.shape[-1]), indices.reshape(m, k)
        for mem in members:
            y = mx.array(_each_pair_alone(xr, ir, mem["weight"], mem["scales"], mem["biases"],
                                          mem.group_size, mem.bits))
            y = y.reshape(*indices.shape, 1, y.shape[-1])
            if "bias" in mem:
                y = y + mx.expand_dims(mem["bias"][indices], -2)
            outs.append(y)
        if out == switch_layers.SWIGLU:  # the native SwiGLU the engine's layers run
            return [native.silu_mul(outs[0], outs[1])]
        if out == switch_layers.WEIGHTED_SUM:
            return [mx.array(_fma_slots(np.array(outs[0][..., 0, :]), np.array(slot_weights)))]
        return outs

    monkeypatch.setattr(switch_layers, "grouped_call", each_alone)
    want = _run_steps(tree, [IDS])
    for step, (w, g) in enumerate(zip(want, got, strict=True)):
        assert np.array_equal(w, g), step


@pytest.mark.parametrize("name", MOE)
def test_a_moe_row_alone_equals_the_row_batched_with_rows_routed_elsewhere(name: str,
                                                                          monkeypatch) -> None:
    """The engine's copy as ModelRunner makes it (row-wise layers, native linears, experts
    grouped): four prompts in one batch, whose rows share some experts and not others, give
    each row's logits bit for bit as that row alone, prompt and decode steps."""
    from engine.native import layers, switch_layers

    model = _quantized(name)
    tree = engine_copy(model)
    layers.install(tree, CpuOptions())
    routes = []
    real = switch_layers.grouped_call

    def recording(members, x, indices, *out):
        routes.append(np.array(indices).reshape(-1, indices.shape[-1]))
        return real(members, x, indices, *out)

    monkeypatch.setattr(switch_layers, "grouped_call", recording)
    rng = np.random.default_rng(5)
    prompts = [rng.integers(3, 250, 12).tolist() for _ in range(4)]
    batch = _run_steps(tree, prompts)
    # in the batch's passes, rows (tokens) sharing an expert and rows routed elsewhere
    sets = [{frozenset(r) for r in call} for call in routes]
    assert routes and all(len(s) > 1 for s in sets[:1]), sets[:1]
    assert any(len(s) > 1 and any(a & b for a in s for b in s if a != b) for s in sets)
    for i, prompt in enumerate(prompts):
        alone = _run_steps(tree, [prompt])
        for step, (a, b) in enumerate(zip(alone, batch, strict=True)):
            assert np.array_equal(a[0], b[i]), (i, step)


@pytest.mark.parametrize("name", ["granite", "gemma4-untied"])
def test_an_untied_finished_head_is_found_and_finishes_once(name: str, monkeypatch) -> None:
    """An untied Granite (logits / logits_scaling) or Gemma 4 (soft-capped): the engine's
    copy (as ModelRunner makes it) finds its output head, the engine's linear with the
    model's finish, under the loaded model's parameter names; the copy's own call (decode
    steps) and the head on the last position give the same logits (within 1e-5 of their
    range: the quantized linears are the same for any rows, the rest float32), and the
    head's logits are the raw linear's finished exactly once (Granite: the same bits;
    Gemma 4: inside an engine pass native.softcap, within its bound of the stock tanh)."""
    from dataclasses import replace

    from mlx.utils import tree_flatten

    from engine.model_runner import ModelRunner

    case = CASES["gemma4" if name.startswith("gemma4") else name]
    if name == "gemma4-untied":
        case = replace(case, config={**case.config, "tie_word_embeddings": False})
    model = _quantized_case(case)
    assert "lm_head" in model
    runner = ModelRunner(model)
    assert runner.head is not None
    assert ([k for k, _ in tree_flatten(runner.model.parameters())]
            == [k for k, _ in tree_flatten(model.parameters())])
    assert all(type(m).__module__.startswith(("mlx.", "mlx_lm.")) for _, m in model.named_modules())
    ids = mx.array([IDS])
    capped = []
    real = native.softcap
    monkeypatch.setattr(native, "softcap", lambda *a, **k: capped.append(a[1]) or real(*a, **k))
    with cpu_kernels.active(runner.cpu):
        whole = np.array(runner.model(ids)[:, -1])
        hidden = runner.model.model(ids)[:, -1:]
        last = np.array(runner.head(hidden)[:, 0])
        raw = type(runner.model.lm_head).__mro__[1].__call__(runner.model.lm_head, hidden)[:, 0]
    assert np.abs(whole - last).max() <= 1e-5 * np.abs(whole).max()
    if name == "granite":
        assert not capped
        assert np.array_equal(last, np.array(raw / model.logits_scaling))
    else:
        cap = model.final_logit_softcapping
        assert capped == [cap, cap]
        stock = np.array(mx.tanh(raw / cap) * cap)
        assert np.abs(last - stock).max() <= 4e-7 * cap


def _quantized_case(case) -> nn.Module:
    model = build_model(case, seed=4)
    nn.quantize(model, group_size=32, bits=4, class_predicate=lambda _, m: (
        hasattr(m, "to_quantized") and m.weight.shape[-1] % 32 == 0))
    mx.eval(model.parameters())
    return model
