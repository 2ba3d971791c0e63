"""Issue #48 on whole models: a GGUF in Q4_K or Q5_K and Q6_K (a Q4_K_M- or Q5_K_M-like mix:
Q6_K for the embedding, attn_v and ffn_down) loads with its linears, embedding and experts
in the packed kernel's K-quant forms (src/packed.h), gives the engine's logits and mlx-lm's
arrays and logits bit for bit as a load that holds the affine form, and keeps the
same-answer guarantee (batched, chunked, cached; the test of
tests/engine/test_gguf_architectures.py run on these files).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import mlx.core as mx
import pytest
from gguf import GGMLQuantizationType
from mlx.utils import tree_flatten

from engine import cache as kv
from engine.loader import gguf as gguf_loader
from engine.loader import load_model
from engine.loader.packed_form import AFFINE, Q4K, Q5K, Q6K, prepacked
from engine.model_runner import ModelRunner
from tests.engine.test_gguf_architectures import (  # noqa: F401  (collected here too)
    test_the_same_answer_batched_chunked_and_cached,
)
from tests.gguf_models import CASES, build_model, gguf_tensors, quantize, write_gguf

pytestmark = pytest.mark.usefixtures("native_built")
T = GGMLQuantizationType
WIDE = {"hidden_size": 256, "intermediate_size": 512}  # whole 256-blocks for the K-quants
MODELS = {
    "llama": replace(CASES["llama"], config=dict(CASES["llama"].config, **WIDE)),
    "qwen3moe": replace(CASES["qwen3moe"], config=dict(
        CASES["qwen3moe"].config, **WIDE, head_dim=64, moe_intermediate_size=256)),
}


MIXES = {"Q4_K_M": (T.Q4_K, Q4K), "Q5_K_M": (T.Q5_K, Q5K)}  # the main type and its form
FILES = [("llama", "Q4_K_M"), ("qwen3moe", "Q4_K_M"), ("llama", "Q5_K_M")]


def _write(name: str, mix: str, directory: Path) -> Path:
    case, main = MODELS[name], MIXES[mix][0]

    def kind(tensor: str) -> T:
        wide = tensor == "token_embd.weight" or ".attn_v." in tensor or ".ffn_down" in tensor
        return T.Q6_K if wide else main

    tensors, raw = quantize(gguf_tensors(case, build_model(case, seed=2)), main, seed=5,
                            which=kind)
    # every matrix quantized (a float32 linear is another kernel: not what this tests)
    assert {n for n, w in tensors.items() if n not in raw and w.ndim >= 2} == set()
    assert set(raw.values()) == {main, T.Q6_K}
    return write_gguf(directory / f"{name}-{mix}.gguf", case, tensors, raw_types=raw)


@pytest.fixture(scope="module", params=FILES, ids=[f"{n}-{m}" for n, m in FILES])
def quantized(request, tmp_path_factory):
    """The same-answer test's model (its fixture's name)."""
    return load_model(str(_write(*request.param, tmp_path_factory.mktemp(request.param[0]))))


@pytest.mark.parametrize(("name", "mix"), FILES, ids=[f"{n}-{m}" for n, m in FILES])
def test_k_forms_give_the_affine_loads_bits(name: str, mix: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(name, mix, tmp_path)
    one = load_model(str(path))
    monkeypatch.setattr(gguf_loader, "packs_weights", lambda cpu: False)
    two = load_model(str(path))  # the affine arrays, packed again by the engine

    forms = {p: prepacked(m).form for p, m in one.model.named_modules()
             if prepacked(m) is not None}
    main = MIXES[mix][1]
    assert forms["model.embed_tokens"] == Q6K
    assert set(forms.values()) == {main, Q6K} and AFFINE not in forms.values()
    if name == "qwen3moe":
        assert forms["model.layers.0.mlp.switch_mlp.up_proj"] == main
        assert forms["model.layers.0.mlp.switch_mlp.down_proj"] == Q6K

    ids = [1, 40, 50, 60, 70, 80, 3, 5, 7, 200]
    r1, r2 = ModelRunner(one.model), ModelRunner(two.model)  # the engine first: views lazy
    l1 = r1.prefill(kv.new_cache(r1.model), ids, logits=True)
    l2 = r2.prefill(kv.new_cache(r2.model), ids, logits=True)
    assert mx.array_equal(l1, l2).item()
    engine_mods = dict(r1.model.named_modules())
    for path_, form in forms.items():  # the engine runs the loader's copy, in its form
        mod = engine_mods[path_]
        held = getattr(mod, "_native_packed", None) or mod._experts_packed
        assert held[0] is prepacked(dict(one.model.named_modules())[path_]).weight
        assert getattr(mod, "_packed_form", getattr(mod, "_experts_form", None)) == form
    if name == "qwen3moe":  # down in Q6_K beside Q4_K gate and up: still the two fused ops
        glu = engine_mods["model.layers.0.mlp.switch_mlp"]
        experts = glu.gate_proj["weight"].shape[0]
        inds = mx.array([[0, 1], [1, experts - 1]], dtype=mx.uint32)
        h = mx.random.normal((2, engine_mods["model.norm"].weight.shape[0]))
        assert glu.weighted(h, inds, mx.full(inds.shape, 0.5)) is not None

    theirs = dict(tree_flatten(two.model.parameters()))
    for key, value in tree_flatten(one.model.parameters()):
        assert value.dtype == theirs[key].dtype and value.shape == theirs[key].shape, key
        assert mx.array_equal(value, theirs[key]).item(), key
    x = mx.array([ids])
    assert mx.array_equal(one.model(x), two.model(x)).item()  # mlx-lm's own path
