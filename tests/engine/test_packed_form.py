"""Issue #45 (load time): a GGUF's linears are decoded once, straight into the native packed
kernel's layout, and mlx-lm's arrays are lazy views of that copy (engine/loader/
packed_form.py). The packed bytes equal pack_quantized of the affine decoder's arrays, the
views equal those arrays, and a loaded model gives the same arrays and logits, in mlx-lm and
in the engine, as a load that decodes into the affine arrays and packs a second copy."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from mlx.utils import tree_flatten
from mlx_lm.models.switch_layers import QuantizedSwitchLinear

from engine import cache as kv
from engine.loader import gguf as gguf_loader
from engine.loader import load_model
from engine.loader.ggml_types import to_affine
from engine.loader.packed_form import (
    AFFINE,
    Q40,
    Q80,
    SCALE_ONLY_BIAS,
    Prepacked,
    affine_views,
    lookup,
    prepacked,
)
from engine.model_runner import ModelRunner
from tests.engine.test_ggml_types import TYPES, random_blocks
from tests.gguf_models import CASES, build_model, gguf_tensors, quantize, write_gguf

pytestmark = pytest.mark.usefixtures("native_built")
T = GGMLQuantizationType
ROWS = 67  # not a whole number of 16-row panels: the last one is padded with zeros


def _ext():
    from engine import native

    return native.extension()


def _u32(a) -> np.ndarray:
    return (np.asarray(a, dtype=np.float32) + np.float32(0)).view(np.uint32)


def _k(raw: np.ndarray, kind: T) -> int:
    block, size = GGML_QUANT_SIZES[kind]
    return raw.shape[-1] // size * block


# Q4_K, Q5_K, Q6_K, Q4_0, Q8_0, Q5_0, Q5_1 and Q4_1 are packed in forms of their own
# (tests/engine/test_packed_kquants.py, test_native_packed_q5.py)
AFFINE_PACKED = [k for k in TYPES if k not in (T.Q4_K, T.Q5_K, T.Q6_K, T.Q4_0, T.Q8_0,
                                               T.Q5_0, T.Q5_1, T.Q4_1)]


@pytest.mark.parametrize("order", [False, True], ids=["in order", "rows reordered"])
@pytest.mark.parametrize("kind", AFFINE_PACKED, ids=[k.name for k in AFFINE_PACKED])
def test_packed_decoder_gives_pack_quantized_of_the_affine_rows(kind: T, order: bool) -> None:
    raw = random_blocks(kind, rows=ROWS, blocks=2 if GGML_QUANT_SIZES[kind][0] == 256 else 8,
                        seed=int(kind) + 31)
    k = _k(raw, kind)
    rows = np.random.default_rng(int(kind)).permutation(ROWS) if order else np.arange(ROWS)
    a = to_affine(raw, kind, native=False).rows(rows)
    want = _ext().pack_quantized(mx.array(a.packed), mx.array(a.scales), mx.array(a.biases),
                                 a.group, a.bits)
    got = _ext().ggml_to_packed_arrays(int(kind), raw.reshape(-1), ROWS, k,
                                       [int(r) for r in rows] if order else [])
    assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
    for g, w in zip(got, want, strict=True):
        assert mx.array_equal(g, w).item()


@pytest.mark.parametrize("scale_dtype", [mx.float32, mx.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("kind", TYPES, ids=[k.name for k in TYPES])
def test_the_lazy_views_are_the_affine_arrays(kind: T, scale_dtype: mx.Dtype) -> None:
    raw = random_blocks(kind, rows=ROWS, blocks=2 if GGML_QUANT_SIZES[kind][0] == 256 else 8,
                        seed=int(kind) + 5)
    a = to_affine(raw, kind, native=False)
    pk = Prepacked(*_ext().ggml_to_packed_arrays(int(kind), raw.reshape(-1), ROWS,
                                                 _k(raw, kind)))
    w, s, b = affine_views(pk, ROWS, a.bits, scale_dtype)
    assert (w.dtype, s.dtype, b.dtype) == (mx.uint32, scale_dtype, scale_dtype)
    assert np.array_equal(np.asarray(w), a.packed)
    want_s = mx.array(a.scales).astype(scale_dtype)
    want_b = mx.array(a.biases).astype(scale_dtype)
    assert mx.array_equal(s, want_s).item() and mx.array_equal(b, want_b).item()


@pytest.mark.parametrize("kind", TYPES, ids=[k.name for k in TYPES])
def test_an_embedding_lookup_from_the_packed_copy_is_the_views_rows(kind: T) -> None:
    raw = random_blocks(kind, rows=ROWS, blocks=2 if GGML_QUANT_SIZES[kind][0] == 256 else 8,
                        seed=int(kind) + 9)
    pk = Prepacked(*_ext().ggml_to_packed_arrays(int(kind), raw.reshape(-1), ROWS,
                                                 _k(raw, kind)))
    bits = to_affine(raw[:1], kind, native=False).bits
    w, s, b = affine_views(pk, ROWS, bits, mx.float32)
    ids = mx.array([[3, 66, 0, 17, 64], [16, 15, 65, 3, 3]])  # the last panel's rows too
    got = lookup(pk, ids, bits, mx.float32)
    for g, want in zip(got, (w[ids], s[ids], b[ids]), strict=True):
        assert g.shape == want.shape and g.dtype == want.dtype
        assert mx.array_equal(g, want).item()


def test_the_packed_decoder_refuses_bad_input() -> None:
    ext = _ext()
    raw = random_blocks(T.Q4_0, rows=4, blocks=2, seed=1)
    with pytest.raises(ValueError, match="not a type this decodes"):
        ext.ggml_to_packed_arrays(16, raw.reshape(-1), 4, 64)  # IQ2_XXS
    with pytest.raises(ValueError, match="too small"):
        ext.ggml_to_packed_arrays(2, raw.reshape(-1)[:-1], 4, 64)
    with pytest.raises(ValueError, match="N entries"):
        ext.ggml_to_packed_arrays(2, raw.reshape(-1), 4, 64, [0, 1, 2])
    with pytest.raises(ValueError, match="row order"):
        ext.ggml_to_packed_arrays(2, raw.reshape(-1), 4, 64, [0, 1, 2, 4])


def _types(name: str) -> T | None:
    """Each block-32 type the tiny dimensions take, with fp16-exact (Q4_0, Q8_0, Q5_1) and
    other scales, the embedding among them."""
    if name == "token_embd.weight" or ".ffn_down" in name:
        return T.Q8_0
    if ".attn_v." in name or ".attn_output." in name:
        return T.Q5_1
    if ".ffn_up." in name:
        return T.IQ4_NL
    return T.Q4_0


# q/k rows put back; biases; a MoE's stacked experts (qwen3moe; gpt-oss with expert biases;
# Gemma 4's fused gate/up experts, whose halves are views of the file's rows)
@pytest.mark.parametrize("name", ["llama", "qwen2", "qwen3moe", "gpt-oss", "gemma4-moe"])
def test_a_prepacked_load_equals_a_load_that_packs_a_second_copy(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    tensors, raw = quantize(gguf_tensors(case, build_model(case, seed=4)), T.Q4_0, seed=9,
                            which=_types)
    path = write_gguf(tmp_path / f"{name}.gguf", case, tensors, raw_types=raw)
    one = load_model(str(path))
    monkeypatch.setattr(gguf_loader, "packs_weights", lambda cpu: False)
    two = load_model(str(path))

    # the engine first, while mlx-lm's arrays of the prepacked load are still unevaluated
    ids = [1, 40, 50, 60, 70, 80, 3, 5, 7, 200]
    r1, r2 = ModelRunner(one.model), ModelRunner(two.model)
    l1 = r1.prefill(kv.new_cache(r1.model), ids, logits=True)
    l2 = r2.prefill(kv.new_cache(r2.model), ids, logits=True)
    assert mx.array_equal(l1, l2).item()  # the engine's packed kernels

    linears = {p: m for p, m in one.model.named_modules() if prepacked(m) is not None}
    stock = [p for p, m in two.model.named_modules()
             if type(m) in (nn.QuantizedLinear, nn.QuantizedEmbedding, QuantizedSwitchLinear)]
    assert sorted(linears) == sorted(stock) and len(stock) >= 7 * 2 + 1
    experts = [p for p in stock if p.endswith(("switch_mlp.up_proj", "experts.down_proj",
                                                "switch_glu.up_proj"))]
    assert bool(experts) == (name in ("qwen3moe", "gpt-oss", "gemma4-moe")), stock
    # the engine runs the experts on the loader's packed copy: no second one
    engine_mods = dict(r1.model.named_modules())
    for at in experts:
        assert engine_mods[at]._experts_packed[0] is prepacked(linears[at]).weight
    assert "model.embed_tokens" in linears
    assert not any(prepacked(m) is not None for _, m in two.model.named_modules())
    theirs = dict(tree_flatten(two.model.parameters()))
    for key, value in tree_flatten(one.model.parameters()):
        assert value.dtype == theirs[key].dtype and value.shape == theirs[key].shape, key
        assert mx.array_equal(value, theirs[key]).item(), key
    mods = dict(two.model.named_modules())
    for at, m in linears.items():
        s = mods[at]
        pack = _ext().pack_experts if s.weight.ndim == 3 else _ext().pack_quantized
        want = pack(s.weight, s.scales, s.biases, s.group_size, s.bits)
        pk = prepacked(m)
        if pk.form not in (AFFINE, Q40, Q80):  # Q5_1: 5-bit values, its fp16 d and m (the
            continue  # engine's logits above; tests/engine/test_native_packed_q5.py)
        got = pk.arrays()
        if pk.form in SCALE_ONLY_BIAS:  # Q4_0 / Q8_0: the fp16 d alone, the bias formed
            d = pk.scales.astype(mx.float32)
            got = [pk.weight, d, d * SCALE_ONLY_BIAS[pk.form]]
        for g, w in zip(got, want, strict=True):
            assert mx.array_equal(g, w).item(), at
    x = mx.array([ids])
    assert mx.array_equal(one.model(x), two.model(x)).item()  # mlx-lm's own path


def test_without_the_packed_decoder_a_load_keeps_the_affine_arrays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the native extension lacks the packed decoder (or the engine will not pack),
    the load is the affine one: nothing prepacked, the tokenizer still built."""
    from engine.loader import gguf_weights

    case = CASES["llama"]
    tensors, raw = quantize(gguf_tensors(case, build_model(case, seed=4)), T.Q4_0, seed=9,
                            which=_types)
    path = write_gguf(tmp_path / "m.gguf", case, tensors, raw_types=raw)
    monkeypatch.setattr(gguf_weights, "_native_packed_many", lambda: None)
    lm = load_model(str(path))
    assert not any(prepacked(m) is not None for _, m in lm.model.named_modules())
    assert any(type(m) is nn.QuantizedLinear for _, m in lm.model.named_modules())
    assert lm.tokenizer.encode("hello", add_special_tokens=False)
    x = mx.array([[1, 40, 50]])
    assert lm.model(x).shape == (1, 3, case.config["vocab_size"])
