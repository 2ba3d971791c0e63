"""Issue #45 (a): every GGML tensor type the loader keeps quantized dequantizes, as the
engine holds it, to exactly gguf-py's ``dequantize`` of the same blocks, in float32.

Blocks are random bytes (every bit pattern is a valid block) with finite fp16 scales of
every magnitude from 1e-6 to 1e3, so signs, zero scales, the extremes of every sub-scale
and every quantized value occur. "Exactly" is bit for bit after adding +0.0 to both sides:
a group whose scale is zero gives +0 where gguf-py may give -0 (``scale * q + bias`` adds
two zeros), the one difference, and one no product can see.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, dequantize

from engine.loader.ggml_modules import (
    Group16Embedding,
    Group16Linear,
    Group16SwitchLinear,
    dequantize_groups,
)
from engine.loader.ggml_types import AFFINE_TYPES, to_affine, type_form
from tests.engine.conftest import skip_without_native

T = GGMLQuantizationType
# Where each type's fp16 scales sit in its block (bytes), from ggml-common.h's structs.
FP16_SCALES = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
               T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2],
               T.Q6_K: [208], T.IQ4_NL: [0], T.IQ4_XS: [0]}


def random_blocks(kind: GGMLQuantizationType, rows: int, blocks: int, seed: int) -> np.ndarray:
    """(rows, blocks * type_size) random bytes, every fp16 scale finite."""
    rng = np.random.default_rng(seed)
    _, size = GGML_QUANT_SIZES[kind]
    raw = rng.integers(0, 256, size=(rows, blocks, size), dtype=np.uint8)
    for off in FP16_SCALES.get(kind, []):
        mag = 10.0 ** rng.integers(-6, 4, (rows, blocks))
        v = (rng.standard_normal((rows, blocks)) * mag).astype(np.float16)
        v[rng.random((rows, blocks)) < 0.05] = 0  # zero scales occur in real files
        raw[..., off:off + 2] = v.view(np.uint8).reshape(rows, blocks, 2)
    if kind == T.MXFP4:  # an E8M0 exponent: 2^(e-128) with e where products stay finite
        raw[..., 0] = rng.integers(90, 160, (rows, blocks))
    return raw.reshape(rows, -1)


def bits(a: np.ndarray) -> np.ndarray:
    return (np.asarray(a, dtype=np.float32) + np.float32(0)).view(np.uint32)


TYPES = sorted(AFFINE_TYPES, key=lambda k: k.name)


DECODERS = [False, True]


def decode(raw: np.ndarray, kind: GGMLQuantizationType, native: bool):
    if native:
        skip_without_native()  # built here when the tools are there (CI has them)
    return to_affine(raw, kind, native=native)


@pytest.mark.parametrize("native", DECODERS, ids=["numpy", "native"])
@pytest.mark.parametrize("kind", TYPES, ids=[k.name for k in TYPES])
def test_every_type_dequantizes_to_gguf_py_bit_for_bit(kind: GGMLQuantizationType,
                                                       native: bool) -> None:
    """Through either decoder: numpy (ggml_types.py) and the engine's native one
    (engine/native/src/ggml_decode.cpp, what a load uses where it is built)."""
    raw = random_blocks(kind, rows=13, blocks=3, seed=int(kind))
    reference = dequantize(raw, kind)
    a = decode(raw, kind, native)
    form = type_form(kind)
    assert (a.group, a.bits) == (form.group, form.bits)
    assert a.q.shape == reference.shape and int(a.q.max()) < 2 ** a.bits
    assert np.array_equal(bits(a.dequantize()), bits(reference))
    # and as the engine runs it: MLX's dequantize (groups of 32) or the Group16 layers'
    w, s, b = mx.array(a.packed), mx.array(a.scales), mx.array(a.biases)
    if a.group == 32:
        ours = mx.dequantize(w, s, b, group_size=32, bits=a.bits)
    else:
        ours = dequantize_groups(w, s, b, 16, a.bits)
    assert np.array_equal(bits(np.array(ours)), bits(reference))


@pytest.mark.parametrize("native", DECODERS, ids=["numpy", "native"])
@pytest.mark.parametrize("kind", TYPES, ids=[k.name for k in TYPES])
def test_stacked_experts_convert_as_their_rows(kind: GGMLQuantizationType,
                                               native: bool) -> None:
    """A 3-D tensor (experts, rows, bytes) is each expert's rows."""
    raw = random_blocks(kind, rows=4 * 5, blocks=2, seed=7).reshape(4, 5, -1)
    a = decode(raw, kind, native)
    assert a.q.shape[:2] == (4, 5)
    assert np.array_equal(bits(a.dequantize()), bits(dequantize(raw, kind)))


def test_group16_layers_compute_with_the_exact_weights() -> None:
    raw = random_blocks(T.Q6_K, rows=6, blocks=1, seed=3)
    a = to_affine(raw, T.Q6_K)
    w, s, b = mx.array(a.packed), mx.array(a.scales), mx.array(a.biases)
    x = mx.random.normal((3, 256))
    lin = Group16Linear(w, s, b, a.bits, bias=mx.ones((6,)))
    ref = np.array(x) @ dequantize(raw, T.Q6_K).T + 1
    np.testing.assert_allclose(np.array(lin(x)), ref, rtol=1e-5, atol=1e-5)
    emb = Group16Embedding(w, s, b, a.bits)
    assert np.array_equal(bits(np.array(emb(mx.array([4, 1])))),
                          bits(dequantize(raw, T.Q6_K)[[4, 1]]))
    np.testing.assert_allclose(np.array(emb.as_linear(x)), ref - 1, rtol=1e-5, atol=1e-5)


def test_group16_experts_compute_each_token_with_its_experts_weights() -> None:
    raw = random_blocks(T.Q6_K, rows=3 * 4, blocks=1, seed=9).reshape(3, 4, -1)  # 3 experts
    a = to_affine(raw, T.Q6_K)
    experts = Group16SwitchLinear(mx.array(a.packed), mx.array(a.scales), mx.array(a.biases),
                                  a.bits, bias=mx.array(np.arange(12, dtype=np.float32)
                                                        .reshape(3, 4)))
    x = mx.random.normal((2, 1, 256))
    chosen = mx.array([[2, 0], [1, 1]])  # two tokens, two experts each
    y = np.array(experts(x[:, None], chosen))  # (2, 2, 1, 4) as mlx-lm's SwitchGLU calls it
    w = dequantize(raw.reshape(12, -1), T.Q6_K).reshape(3, 4, 256)
    for t in range(2):
        for k in range(2):
            e = int(chosen[t, k])
            ref = np.array(x[t, 0]) @ w[e].T + np.arange(12).reshape(3, 4)[e]
            np.testing.assert_allclose(y[t, k, 0], ref, rtol=1e-5, atol=1e-4)


@pytest.mark.usefixtures("native_built")
@pytest.mark.parametrize("kind", TYPES, ids=[k.name for k in TYPES])
def test_the_native_decoder_gives_numpys_arrays_exactly(kind: GGMLQuantizationType) -> None:
    """Bit for bit, signs of zero included: the packed values and every scale and bias (many
    rows, so the rows' split over the threads is exercised)."""
    raw = random_blocks(kind, rows=301, blocks=2, seed=int(kind) + 1)
    a, b = to_affine(raw, kind, native=False), to_affine(raw, kind, native=True)
    assert np.array_equal(a.packed, b.packed)
    assert np.array_equal(a.scales.view(np.uint32), b.scales.view(np.uint32))
    assert np.array_equal(a.biases.view(np.uint32), b.biases.view(np.uint32))


@pytest.mark.usefixtures("native_built")
def test_the_native_decoder_refuses_what_it_cannot_decode() -> None:
    from engine import native

    ext = native.extension()
    out = np.empty(64, dtype=np.uint8), np.empty(8, np.float32), np.empty(8, np.float32)
    with pytest.raises(ValueError, match="not a type this decodes"):
        ext.ggml_to_affine(16, np.zeros(100, np.uint8), 1, 256, *out)  # IQ2_XXS
    with pytest.raises(ValueError, match="too small"):
        ext.ggml_to_affine(12, np.zeros(100, np.uint8), 1, 256, *out)  # Q4_K needs 144


@pytest.mark.usefixtures("native_built")
@pytest.mark.parametrize("kind", TYPES, ids=[k.name for k in TYPES])
def test_the_loaders_mlx_arrays_are_numpys_arrays_exactly(kind: GGMLQuantizationType) -> None:
    """What a load uses (decoded straight into arrays MLX owns): the same bits and shapes as
    numpy's decoder, stacked experts' leading axis kept."""
    from engine import native

    raw = random_blocks(kind, rows=3 * 67, blocks=2, seed=int(kind) + 7)
    block, size = GGML_QUANT_SIZES[kind]
    k = raw.shape[-1] // size * block
    want = to_affine(raw.reshape(3, 67, -1), kind, native=False)
    w, s, b = native.extension().ggml_to_affine_arrays(int(kind), raw.reshape(-1), [3, 67], k)
    assert (w.dtype, s.dtype, b.dtype) == (mx.uint32, mx.float32, mx.float32)
    assert tuple(w.shape) == want.packed.shape and tuple(s.shape) == want.scales.shape
    assert np.array_equal(np.asarray(memoryview(w)), want.packed)
    assert np.array_equal(np.asarray(memoryview(s)).view(np.uint32), want.scales.view(np.uint32))
    assert np.array_equal(np.asarray(memoryview(b)).view(np.uint32), want.biases.view(np.uint32))


@pytest.mark.usefixtures("native_built")
def test_the_loaders_mlx_arrays_refuse_a_short_source() -> None:
    from engine import native

    ext = native.extension()
    with pytest.raises(ValueError, match="not a type this decodes"):
        ext.ggml_to_affine_arrays(16, np.zeros(100, np.uint8), [1], 256)  # IQ2_XXS
    with pytest.raises(ValueError, match="too small"):
        ext.ggml_to_affine_arrays(12, np.zeros(143, np.uint8), [1], 256)  # Q4_K: 144 a row
