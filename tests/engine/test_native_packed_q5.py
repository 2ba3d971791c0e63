"""Issue #48: GGUF's Q5_0, Q5_1 and Q4_1 held in the packed kernel at their file's width
(src/packed.h's kQ50, kQ51 and kQ41 forms). llama.cpp's Q4_K_M and Q5_K_M write a tensor
whose rows are not whole 256-blocks in Q5_0 / Q5_1 (llama-quant.cpp's fallback: SmolLM2's
576-wide MLP, Gemma 3's 1,152), and those were held as 8-bit values with a float32 scale
and bias a 32 (10 bits a weight against the file's 5.5 and 6); the bundled model's Q4_1 at
6 against 5.

- the bytes a weight takes: the file's, 5.5 (Q5_0), 6.0 (Q5_1), 5.0 (Q4_1);
- mlx-lm's arrays (lazy views of the packed copy) dequantize to gguf-py's `dequantize` bit
  for bit;
- every output equals, bit for bit, that of the affine form packed from the same weights
  (today's arithmetic), for a row alone or in any batch, on the AVX-512 VNNI, AVX2 and
  portable paths, dense and as stacked experts; and it is x @ gguf-py's weights up to the
  int8 rounding of x;
- a GGUF with such rows loads them in these forms, and the engine's logits are those of a
  load that decodes into the affine arrays and packs a second copy.
"""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, dequantize

from engine import cache as kv
from engine import native
from engine.loader import gguf as gguf_loader
from engine.loader import load_model
from engine.loader.ggml_types import to_affine
from engine.loader.packed_form import Q41, Q50, Q51, affine_views, prepacked
from engine.loader.support import PACKED_BITS
from engine.model_runner import ModelRunner
from tests.engine.test_ggml_types import bits as f32_bits
from tests.engine.test_native_packed import VNNI
from tests.engine.test_native_qmv import _cpu_flags
from tests.engine.test_packed_kquants import _affine_packed, _packed, _run
from tests.gguf_models import CASES, build_model, gguf_tensors, quantize, write_gguf

pytestmark = pytest.mark.usefixtures("native_built")
T = GGMLQuantizationType
# type: (form, the kernel's group size and bits, bits a weight held, mlx-lm's bits)
FORMS = {T.Q5_0: (Q50, 32, 5, 5.5, 8), T.Q5_1: (Q51, 32, 5, 6.0, 8),
         T.Q4_1: (Q41, 32, 4, 5.0, 4)}
KINDS = list(FORMS)
IDS = [k.name for k in KINDS]


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_held_at_the_files_width(kind: T) -> None:
    form, group, kbits, held, _ = FORMS[kind]
    assert native.extension().ggml_packed_form(int(kind)) == form
    _, pk, k = _packed(kind, rows=64, blocks=5, seed=1)
    assert pk.form == form and pk.kernel_layout(99, 99) == (group, kbits)
    assert pk.weight.shape == (64, k * kbits // 8)
    nbytes = sum(a.nbytes for a in pk.arrays())
    block, size = GGML_QUANT_SIZES[kind]
    assert nbytes * 8 / (64 * k) == held == size * 8 / block == PACKED_BITS[int(kind)]


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_views_dequantize_to_gguf_py_bit_for_bit(kind: T) -> None:
    raw, pk, _ = _packed(kind, rows=67, blocks=4, seed=int(kind) + 3)
    w, s, b = affine_views(pk, 67, FORMS[kind][4], mx.float32)
    ours = mx.dequantize(w, s, b, group_size=32, bits=FORMS[kind][4])
    assert np.array_equal(f32_bits(np.array(ours)), f32_bits(dequantize(raw, kind)))


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_every_output_is_the_affine_forms_in_any_batch_on_every_path(
        kind: T, monkeypatch: pytest.MonkeyPatch) -> None:
    form, group, kbits, _, _ = FORMS[kind]
    raw, pk, k = _packed(kind, rows=37, blocks=3, seed=int(kind))
    affine, agroup, abits = _affine_packed(raw, kind)
    x = mx.array(np.random.default_rng(2).standard_normal((21, k)).astype(np.float32) * 3)
    want = _run(x, affine, 37, agroup, abits)
    # the reference's weights (gguf-py), up to x's int8 rounding (a step of max|x| / 127 a
    # 32-block): the form's values, scales and biases are the file's, not another's
    ref = np.array(x) @ dequantize(raw, kind).T
    scale = np.abs(ref).max()
    assert np.abs(want - ref).max() < 0.02 * scale
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
    for m in (1, 2, 4, 8, 13):
        assert np.array_equal(_run(x[21 - m:], pk.arrays(), 37, group, kbits, form),
                              want[21 - m:]), m


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
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
    _, q51, k = _packed(T.Q5_1, rows=16, blocks=1, seed=5)
    x = mx.zeros((1, k))
    with pytest.raises(ValueError, match="group size and bits"):
        native.packed_matvec_many(x, [q51.arrays()], [16], 32, 8, form=Q51)
    with pytest.raises(ValueError, match="do not match"):  # Q5_1's d and m as Q5_0's d
        native.packed_matvec_many(x, [q51.arrays()], [16], 32, 5, form=Q50)
    _, q41, _ = _packed(T.Q4_1, rows=16, blocks=1, seed=5)
    with pytest.raises(ValueError, match="scales and biases do not match"):  # as affine
        native.packed_matvec_many(x, [q41.arrays()], [16], 32, 4)


def _fallbacks(name: str) -> T | None:
    """A Q4_K_M / Q5_K_M file's fallback rows (the tiny model's rows are 64 wide: no
    256-blocks), Q8_0 for the rest as Q6_K's fallback; the embedding Q4_1."""
    if name == "token_embd.weight":
        return T.Q4_1
    if ".ffn_gate." in name or ".ffn_up." in name or ".attn_q." in name:
        return T.Q5_0
    if ".ffn_down." in name or ".attn_v." in name:
        return T.Q5_1
    if ".attn_output." in name:
        return T.Q4_1
    return T.Q8_0


@pytest.mark.parametrize("name", ["llama", "qwen3moe"])
def test_a_file_with_q5_rows_loads_them_at_the_files_width(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    tensors, raw = quantize(gguf_tensors(case, build_model(case, seed=4)), T.Q5_0, seed=7,
                            which=_fallbacks)
    assert {T.Q5_0, T.Q5_1, T.Q4_1} <= set(raw.values())
    path = write_gguf(tmp_path / f"{name}.gguf", case, tensors, raw_types=raw)
    one = load_model(str(path))
    forms = {prepacked(m).form for _, m in one.model.named_modules()
             if prepacked(m) is not None}
    assert {Q50, Q51, Q41} <= forms
    for _, m in one.model.named_modules():
        pk = prepacked(m)
        if pk is not None and pk.form in (Q50, Q51, Q41):  # the file's bytes, to the byte
            rows, k = pk.weight.shape[0], pk.scales.shape[1] * 32
            kind = {Q50: T.Q5_0, Q51: T.Q5_1, Q41: T.Q4_1}[pk.form]
            block, size = GGML_QUANT_SIZES[kind]
            assert sum(a.nbytes for a in pk.arrays()) == rows * k // block * size
    monkeypatch.setattr(gguf_loader, "packs_weights", lambda cpu: False)
    two = load_model(str(path))  # the affine arrays, packed by the engine: today's form
    assert not any(prepacked(m) is not None for _, m in two.model.named_modules())
    ids = [1, 40, 50, 60, 70, 80, 3, 5, 7, 200]
    r1, r2 = ModelRunner(one.model), ModelRunner(two.model)
    l1 = r1.prefill(kv.new_cache(r1.model), ids, logits=True)
    l2 = r2.prefill(kv.new_cache(r2.model), ids, logits=True)
    assert mx.array_equal(l1, l2).item()
    x = mx.array([ids])
    assert mx.array_equal(one.model(x), two.model(x)).item()  # mlx-lm's own path
