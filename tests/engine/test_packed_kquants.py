"""Issue #48: GGUF's Q4_K, Q5_K and Q6_K held in the packed kernel near their file's width
(src/packed.h's kQ4K, kQ5K and kQ6K forms: the file's sub-scales and super-block scales,
whose products the kernel forms in float32 as gguf-py does) instead of float32 scale and
bias per group (6.0, 10.0 and 12.0 bits a weight); Q4_0 and Q8_0 at their file's width
(kQ40, kQ80: the file's fp16 d alone, the bias d * -8 or -128 formed in the kernel) instead
of 6.0 and 10.0.

- the bytes a weight takes: the file's, 4.5 (Q4_K), 5.5 (Q5_K), 6.5625 (Q6_K), 4.5 (Q4_0)
  and 8.5 (Q8_0) (Q4_K, Q5_K and Q6_K were 4.75, 5.75 and 6.625 with float32 d and byte
  sub-scales);
- the weights, as mlx-lm's arrays (lazy views of the packed copy), dequantize to gguf-py's
  `dequantize` bit for bit in float32, on random blocks with finite fp16 scales of every
  magnitude (zeros and subnormals among them);
- every output equals, bit for bit, that of the affine form packed from the same weights
  (the arithmetic before this issue), for a row alone or in any batch, on the AVX-512 VNNI,
  AVX2 and portable paths, dense and as stacked experts.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, dequantize

from engine import native
from engine.loader.ggml_modules import dequantize_groups
from engine.loader.ggml_types import to_affine
from engine.loader.packed_form import Q4K, Q5K, Q6K, Q40, Q80, Prepacked, affine_views
from tests.engine.test_ggml_types import bits as f32_bits
from tests.engine.test_ggml_types import random_blocks
from tests.engine.test_native_packed import VNNI
from tests.engine.test_native_qmv import _cpu_flags

pytestmark = pytest.mark.usefixtures("native_built")
T = GGMLQuantizationType
# type: (form, the kernel's group size and bits, bits a weight held, mlx-lm's bits)
FORMS = {T.Q4_K: (Q4K, 32, 4, 4.5, 4), T.Q5_K: (Q5K, 32, 5, 5.5, 8),
         T.Q6_K: (Q6K, 16, 6, 6.5625, 8), T.Q4_0: (Q40, 32, 4, 4.5, 4),
         T.Q8_0: (Q80, 32, 8, 8.5, 8)}
KINDS = list(FORMS)


def _packed(kind: T, rows: int, blocks: int, seed: int) -> tuple[np.ndarray, Prepacked, int]:
    raw = random_blocks(kind, rows=rows, blocks=blocks, seed=seed)
    block, size = GGML_QUANT_SIZES[kind]
    k = raw.shape[-1] // size * block
    return raw, Prepacked(*native.extension().ggml_to_packed_arrays(
        int(kind), raw.reshape(-1), rows, k)), k


def _affine_packed(raw: np.ndarray, kind: T) -> tuple[list[mx.array], int, int]:
    a = to_affine(raw, kind, native=False)
    return (native.pack_quantized(mx.array(a.packed), mx.array(a.scales), mx.array(a.biases),
                                  a.group, a.bits), a.group, a.bits)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_held_near_the_files_width(kind: T) -> None:
    form, group, kbits, held, _ = FORMS[kind]
    assert native.extension().ggml_packed_form(int(kind)) == form
    _, pk, k = _packed(kind, rows=64, blocks=3, seed=1)
    assert pk.form == form and pk.kernel_layout(99, 99) == (group, kbits)
    assert pk.weight.shape == (64, k * kbits // 8)
    nbytes = sum(a.nbytes for a in pk.arrays())
    assert nbytes * 8 / (64 * k) == held
    block, size = GGML_QUANT_SIZES[kind]
    assert held - size * 8 / block < 0.26  # was 6.0 (Q4_K, Q4_0), 10.0 (Q5_K, Q8_0), 12.0


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_the_views_dequantize_to_gguf_py_bit_for_bit(kind: T) -> None:
    raw, pk, _ = _packed(kind, rows=67, blocks=4, seed=int(kind) + 3)
    _, group, _, _, bits = FORMS[kind]
    w, s, b = affine_views(pk, 67, bits, mx.float32)
    if group == 32:
        ours = mx.dequantize(w, s, b, group_size=32, bits=bits)
    else:
        ours = dequantize_groups(w, s, b, 16, bits)
    assert np.array_equal(f32_bits(np.array(ours)), f32_bits(dequantize(raw, kind)))


def _run(x, packed, n, group, kbits, form=0, scalar=False) -> np.ndarray:
    return np.array(native.packed_matvec_many(x, [packed], [n], group, kbits,
                                              force_scalar=scalar, form=form)[0])


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_output_is_the_affine_forms_in_any_batch_on_every_path(
        kind: T, monkeypatch: pytest.MonkeyPatch) -> None:
    form, group, kbits, _, _ = FORMS[kind]
    raw, pk, k = _packed(kind, rows=37, blocks=3, seed=int(kind))
    affine, agroup, abits = _affine_packed(raw, kind)
    x = mx.array(np.random.default_rng(2).standard_normal((21, k)).astype(np.float32) * 3)
    want = _run(x, affine, 37, agroup, abits)
    paths = [("default", {}, False), ("portable", {}, True),
             ("avx2", {"BATCHCHAT_NATIVE_AVX512": "0"}, False)]
    for name, env, scalar in paths:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        full = _run(x, pk.arrays(), 37, group, kbits, form, scalar)
        assert np.array_equal(full, want), name
        for m in (1, 2, 3, 5, 8, 13):
            assert np.array_equal(_run(x[21 - m:], pk.arrays(), 37, group, kbits, form, scalar),
                                  want[21 - m:]), (name, m)
    if not VNNI <= _cpu_flags():
        pytest.skip("no AVX-512 VNNI here: only the AVX2 and portable paths were compared")
    monkeypatch.setenv("BATCHCHAT_NATIVE_AVX512", "1")
    assert native.extension().packed_kernel() == "avx512-vnni"
    assert np.array_equal(_run(x, pk.arrays(), 37, group, kbits, form), want)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_stacked_experts_in_the_form_are_the_affine_experts(kind: T) -> None:
    form, group, kbits, _, _ = FORMS[kind]
    e, n = 3, 32  # whole 16-row panels: the E * N rows decode as each expert packed alone
    raw, pk, k = _packed(kind, rows=e * n, blocks=2, seed=11)
    a = to_affine(raw.reshape(e, n, -1), kind, native=False)
    affine = native.pack_experts(mx.array(a.packed), mx.array(a.scales), mx.array(a.biases),
                                 a.group, a.bits)
    x = mx.array(np.random.default_rng(4).standard_normal((5, 1, k)).astype(np.float32))
    idx = mx.array([[2, 0], [1, 1], [0, 2], [2, 2], [1, 0]])
    for scalar in (False, True):
        got = native.packed_experts_matvec(x, idx, [pk.arrays()], [n], e, group, kbits,
                                           force_scalar=scalar, form=form)[0]
        want = native.packed_experts_matvec(x, idx, [affine], [n], e, a.group, a.bits,
                                            force_scalar=scalar)[0]
        assert mx.array_equal(got, want).item()


def test_a_form_refuses_another_layout() -> None:
    _, pk, k = _packed(T.Q6_K, rows=16, blocks=1, seed=5)
    x = mx.zeros((1, k))
    with pytest.raises(ValueError, match="group size and bits"):
        native.packed_matvec_many(x, [pk.arrays()], [16], 16, 8, form=Q6K)
    with pytest.raises(ValueError, match="form must be"):
        native.packed_matvec_many(x, [pk.arrays()], [16], 16, 6, form=99)
    with pytest.raises(ValueError, match="do not match"):  # Q6_K's arrays as Q4_K's
        native.packed_matvec_many(x, [pk.arrays()], [16], 32, 4, form=Q4K)
    _, q4, _ = _packed(T.Q4_K, rows=16, blocks=1, seed=5)
    with pytest.raises(ValueError, match="scales and biases do not match"):  # as affine
        native.packed_matvec_many(x, [q4.arrays()], [16], 32, 4)
