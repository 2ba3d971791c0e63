"""The model library's rules (engine/loader/support.py, read without MLX) agree with what
the loader does: the architectures, vocabularies and tensor types, and the memory a
model's header says it needs against what a load really takes."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from mlx.utils import tree_flatten

from app.models.inspect import describe
from engine import cache as kv
from engine.loader import load_model, support
from engine.loader.errors import ModelLoadError
from engine.loader.ggml_types import AFFINE_TYPES, type_form
from engine.loader.gguf_arch import ARCHS
from engine.loader.gguf_file import read_gguf_file
from engine.loader.gguf_tokenizer import SUPPORTED_MODELS
from engine.loader.packed_form import prepacked
from tests.gguf_models import CASES, build_model, gguf_tensors, quantize, write_gguf

T = GGMLQuantizationType


def test_the_rules_are_the_loaders() -> None:
    assert support.GGUF_ARCHITECTURES == frozenset(ARCHS)
    assert support.GGUF_TOKENIZERS == SUPPORTED_MODELS
    assert set(support.GGUF_KEPT_TYPES) == {int(t) for t in AFFINE_TYPES}
    for kind in AFFINE_TYPES:
        held, form = support.GGUF_KEPT_TYPES[int(kind)], type_form(kind)
        assert (held.bits, held.group) == (form.bits, form.group)
    # every type the library lets through loads: floats, kept, or dequantized by gguf-py
    for kind in support.GGUF_FLOAT32_TYPES:
        assert T(kind) in GGML_QUANT_SIZES and T(kind) not in AFFINE_TYPES
    assert support.gguf_unsupported("llama", [12, 14, 23, 39, 16]) == ""
    assert "Q8_K" in support.gguf_unsupported("llama", [15])
    assert "'rwkv7'" in support.gguf_unsupported("rwkv7", [0])
    assert "'plamo2'" in support.gguf_tokenizer_unsupported("plamo2")


def test_the_weights_estimate_is_what_a_load_holds(tmp_path: Path) -> None:
    case = CASES["qwen3"]
    big = dict(case.config, hidden_size=256, intermediate_size=512, num_attention_heads=4,
               num_key_value_heads=2, head_dim=64)
    case = type(case)(case.gguf_arch, big, metadata=case.metadata)

    def kind(name: str) -> T | None:
        return T.Q6_K if ".attn_v." in name or ".ffn_down" in name else T.Q4_K

    tensors, raw = quantize(gguf_tensors(case, build_model(case)), T.Q4_K, which=kind)
    path = write_gguf(tmp_path / "m.gguf", case, tensors, raw_types=raw)
    f = read_gguf_file(path)
    by_type: Counter[int] = Counter()
    for t in f.tensors.values():
        by_type[int(t.kind)] += int(np.prod(t.shape))
    need = support.gguf_memory(by_type, layers=2, kv_heads=2, head_dim=64, context=512)
    loaded = load_model(str(path))
    # on the CPU with the packed kernel the quantized weights are held once, packed (their
    # MLX arrays are lazy views of it: engine/loader/packed_form.py); elsewhere as MLX's
    packs = {id(m): pk for _, m in loaded.model.named_modules()
             if (pk := prepacked(m)) is not None}
    views = {id(m[k]) for _, m in loaded.model.named_modules() if id(m) in packs
             for k in ("weight", "scales", "biases")}
    held = sum(v.nbytes for _, v in tree_flatten(loaded.model.parameters()) if id(v) not in views)
    held += sum(a.nbytes for pk in packs.values() for a in pk.arrays())
    if not packs:
        need = support.gguf_memory(by_type, layers=2, kv_heads=2, head_dim=64, context=512,
                                   packed_copy=False)
    assert abs(need.weights + need.packed - held) <= 0.03 * held, (need, held)
    assert need.kv_budget >= 256 << 20
    assert "needs ~" in need.describe()


def _refused_files(tmp_path: Path) -> dict[str, Path]:
    case = CASES["llama"]
    tensors = gguf_tensors(case, build_model(case))
    rope = replace(case, metadata=lambda w, c: w.add_string("llama.rope.scaling.type", "su"))
    no_embedding = {k: v for k, v in tensors.items() if k != "token_embd.weight"}
    ints = tensors | {"extra.weight": np.arange(64, dtype=np.int32)}
    return {
        "architecture": write_gguf(tmp_path / "arch.gguf", replace(case, gguf_arch="mamba"),
                                   tensors),
        "tensor type": write_gguf(tmp_path / "i32.gguf", case, ints,
                                  raw_types={"extra.weight": T.I32}),
        "rope scaling": write_gguf(tmp_path / "rope.gguf", rope, tensors),
        "vocabulary only": write_gguf(tmp_path / "vocab.gguf", case, no_embedding),
        "mlx-lm model type": _unknown_model_type_dir(tmp_path / "nosuch"),
    }


def _unknown_model_type_dir(path: Path) -> Path:
    path.mkdir()
    (path / "config.json").write_text('{"model_type": "nosuch"}')
    (path / "tokenizer.json").write_text("{}")
    return path


def test_a_refused_gguf_says_at_load_what_the_library_says(tmp_path: Path) -> None:
    """Issue #46 item 15: one list of reasons (support.gguf_refusal), word for word at load
    time, never a reader's internals."""
    for what, path in _refused_files(tmp_path).items():
        entry = describe(path, name=path.name, place="test")
        assert not entry.loads and entry.reason, what
        with pytest.raises(ModelLoadError) as refused:
            load_model(str(path))
        assert str(refused.value) == f"{path}: {entry.reason}", what


def test_a_gemma4_experts_gguf_is_listed_loadable_and_loads(tmp_path: Path) -> None:
    """Gemma 4's mixture of experts (26B-A4B), quantized as llama-quantize leaves it: the
    library says it loads, every expert counted in its size, and it does."""
    case = CASES["gemma4-moe"]
    tensors, raw = quantize(gguf_tensors(case, build_model(case)), T.Q4_0,
                            which=lambda n: T.Q8_0 if ".ffn_down" in n else T.Q4_0)
    path = write_gguf(tmp_path / "gemma-4-tiny-A1B-Q4_0.gguf", case, tensors,
                      raw_types=raw, file_type=2)
    entry = describe(path, name=path.name, place="test")
    assert entry.loads and not entry.reason, entry.reason
    assert entry.architecture == "gemma4" and entry.quantization == "Q4_0"
    assert entry.parameters == sum(int(np.prod(t.shape))
                                   for t in read_gguf_file(path).tensors.values())
    loaded = load_model(str(path))
    assert loaded.model.args.enable_moe_block and loaded.model.args.num_experts == 4


def test_the_library_counts_a_tokens_kv_as_the_engine_measures_it(tmp_path: Path) -> None:
    """The header's per-layer shapes (Gemma 4: two head sizes, KV shared by the last
    layers) give the bytes a token adds to the KV that the engine measures on the model."""
    from app.models.gguf_header import read_gguf_header
    from app.models.inspect import kv_width
    from engine.kv_memory import bytes_per_token

    for name in ("llama", "gemma3", "gemma4", "gemma4-moe", "gpt-oss", "qwen35", "qwen35moe"):
        case = CASES[name]
        path = write_gguf(tmp_path / f"{name}.gguf", case,
                          gguf_tensors(case, build_model(case)))
        width = kv_width(read_gguf_header(path))
        assert 2 * width * 4 == bytes_per_token(load_model(str(path)).model), name


def test_a_qwen35_gguf_is_listed_loadable_with_its_recurrent_state(tmp_path: Path) -> None:
    """Qwen 3.5 (hybrid Gated DeltaNet): the library lists it as loadable; only its full
    attention layers hold a per-token KV (the test above), and its recurrent state, a fixed
    size a sequence, is counted apart in what it needs."""
    from app.models.gguf_header import read_gguf_header
    from app.models.inspect import recurrent_state_bytes

    case = CASES["qwen35"]
    path = write_gguf(tmp_path / "qwen3.5-tiny-F32.gguf", case,
                      gguf_tensors(case, build_model(case)))
    entry = describe(path, name=path.name, place="test")
    assert entry.loads and not entry.reason, entry.reason
    assert "recurrent state" in entry.note
    c = case.config
    conv = (c["linear_conv_kernel_dim"] - 1) * (
        2 * c["linear_num_key_heads"] * c["linear_key_head_dim"]
        + c["linear_num_value_heads"] * c["linear_value_head_dim"])
    state = (c["linear_num_value_heads"] * c["linear_value_head_dim"]
             * c["linear_key_head_dim"])
    want = recurrent_state_bytes(read_gguf_header(path))
    assert want == 2 * 4 * (conv + state)  # two Gated DeltaNet layers, float32
    model = load_model(str(path)).model
    probe = kv.new_cache(model)  # what one sequence holds, measured
    model(mx.array([[1]]), cache=probe)
    assert sum(a.nbytes for c in probe if not c.is_trimmable() for a in c.cache) == want
