"""Load a llama-architecture GGUF file into mlx-lm's llama model.

``mx.load`` parses GGUF itself: Q4_0/Q4_1/Q8_0 tensors come back as MLX
affine-quantized triples (``weight`` uint32, ``scales``, ``biases``; group size 32),
F32/F16/BF16 tensors as plain arrays. We rename tensors to mlx-lm's names and either
dequantize (CPU) or keep them quantized (Metal/CUDA).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models import llama
from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer, TokenizerWrapper

from ..cpu_options import CpuOptions
from .common import (
    device_name,
    end_token_ids,
    resolve_quantized,
    weights_description,
    widen_floats,
)
from .errors import ModelLoadError
from .gguf_tokenizer import build_gguf_tokenizer
from .progress import ProgressReporter

GGUF_MAGIC = b"GGUF"
GROUP_SIZE = 32  # GGUF Q4_0/Q4_1/Q8_0 blocks hold 32 weights

# llama.cpp's LLAMA_FTYPE values, for the UI description.
_FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
               10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S",
               15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}

_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_GLOBAL_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
_BLOCK_RE = re.compile(r"^blk\.(\d+)\.([a-z_]+)\.(weight|bias|scales|biases)$")
_GLOBAL_RE = re.compile(r"^([a-z_]+)\.(weight|bias|scales|biases)$")


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def check_gguf_header(path: Path) -> None:
    """Fail early, with a plain message, on files that are not GGUF at all."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read the file: {e.strerror or e}") from e
    if not head:
        raise ModelLoadError(f"{path}: the file is empty (0 bytes); not a GGUF model")
    if head[:4] != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path}: not a GGUF file (starts with {head[:4]!r}, expected b'GGUF')")
    if len(head) < 8:
        raise ModelLoadError(f"{path}: truncated GGUF file ({len(head)} bytes)")


def read_gguf(path: Path) -> tuple[dict[str, mx.array], dict[str, Any]]:
    """mx.load with every failure turned into a ModelLoadError naming the file."""
    check_gguf_header(path)
    try:
        tensors, metadata = mx.load(str(path), return_metadata=True)
    except (RuntimeError, ValueError) as e:
        msg = str(e).removeprefix("[load_gguf] ")
        size = path.stat().st_size
        if "extends past the end" in msg or "gguf_init failed" in msg:
            msg = f"the file is truncated or corrupt ({size:,} bytes; {msg})"
        elif "not supported" in msg:
            msg = (f"{msg}; MLX reads F32/F16/BF16/Q4_0/Q4_1/Q8_0 GGUF tensors only "
                   "(no K-quants such as Q4_K_M)")
        raise ModelLoadError(f"{path}: cannot read GGUF: {msg}") from e
    return tensors, metadata


def _model_args(meta: dict[str, Any], tensors: dict[str, mx.array],
                source: str) -> llama.ModelArgs:
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise ModelLoadError(
            f"{source}: GGUF architecture is {arch!r}; only llama-architecture GGUFs "
            "are supported")

    def get(key: str, default: Any = None, required: bool = True) -> Any:
        value = meta.get(f"llama.{key}")
        if value is None:
            if required and default is None:
                raise ModelLoadError(f"{source}: GGUF metadata lacks llama.{key}")
            return default
        return _scalar(value)

    hidden = int(get("embedding_length"))
    heads = int(get("attention.head_count"))
    vocab_size = get("vocab_size", required=False)
    if vocab_size is None:
        # Older files omit it: the token list (or embedding rows) says it.
        toks = meta.get("tokenizer.ggml.tokens")
        vocab_size = len(toks) if toks else tensors["token_embd.weight"].shape[0]
    head_dim = get("rope.dimension_count", required=False) or hidden // heads
    rope_scaling = None
    scaling_type = get("rope.scaling.type", required=False)
    if scaling_type == "linear":
        rope_scaling = {"type": "linear", "factor": float(get("rope.scaling.factor", 1.0))}
    elif scaling_type not in (None, "none"):
        raise ModelLoadError(f"{source}: RoPE scaling {scaling_type!r} is not supported")
    context = int(get("context_length", 2048, required=False))
    if "rope_freqs.weight" in tensors:
        # Llama 3.1-style per-frequency factors: set up mlx-lm's llama3 RoPE, whose
        # frequencies _apply_rope_freqs then overwrites with the file's.
        rope_scaling = {"rope_type": "llama3", "factor": 1.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": context}
    return llama.ModelArgs(
        model_type="llama",
        hidden_size=hidden,
        num_hidden_layers=int(get("block_count")),
        intermediate_size=int(get("feed_forward_length")),
        num_attention_heads=heads,
        num_key_value_heads=int(get("attention.head_count_kv", heads, required=False)),
        rms_norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-5, required=False)),
        rope_theta=float(get("rope.freq_base", 10000.0, required=False)),
        vocab_size=int(vocab_size),
        head_dim=int(head_dim),
        max_position_embeddings=context,
        # GGUF stores q/k rows permuted for llama.cpp's adjacent-pair RoPE.
        rope_traditional=True,
        rope_scaling=rope_scaling,
        tie_word_embeddings="output.weight" not in tensors,
        attention_bias="blk.0.attn_q.bias" in tensors,
        mlp_bias="blk.0.ffn_up.bias" in tensors,
    )


def _rename(name: str, source: str) -> str | None:
    m = _BLOCK_RE.match(name)
    if m:
        layer, part, kind = m.groups()
        if part not in _LAYER_NAMES:
            raise ModelLoadError(f"{source}: unexpected GGUF tensor {name!r}")
        return f"model.layers.{layer}.{_LAYER_NAMES[part]}.{kind}"
    m = _GLOBAL_RE.match(name)
    if m and m.group(1) in _GLOBAL_NAMES:
        return f"{_GLOBAL_NAMES[m.group(1)]}.{m.group(2)}"
    if name == "rope_freqs.weight":
        return None  # handled by _apply_rope_freqs
    raise ModelLoadError(f"{source}: unexpected GGUF tensor {name!r}")


def _quant_bits(weight: mx.array, scales: mx.array, name: str, source: str) -> int:
    in_dims = scales.shape[-1] * GROUP_SIZE
    bits = weight.shape[-1] * 32 // in_dims
    if bits not in (2, 3, 4, 5, 6, 8) or bits * in_dims != weight.shape[-1] * 32:
        raise ModelLoadError(f"{source}: cannot infer the bit width of quantized tensor "
                             f"{name!r} (weight {weight.shape}, scales {scales.shape})")
    return bits


def _convert_weights(tensors: dict[str, mx.array], keep_quantized: bool, widen: bool,
                     source: str) -> tuple[dict[str, mx.array], dict[str, int]]:
    """Renamed weights and, for kept-quantized modules, their bit widths."""
    renamed = {}
    for name, value in tensors.items():
        new = _rename(name, source)
        if new is not None:
            renamed[new] = value
    weights: dict[str, mx.array] = {}
    bits_by_module: dict[str, int] = {}
    for name, value in renamed.items():
        if name.endswith((".scales", ".biases")):
            continue
        module = name.rsplit(".", 1)[0]
        scales = renamed.get(f"{module}.scales")
        if name.endswith(".weight") and scales is not None:
            biases = renamed.get(f"{module}.biases")
            if biases is None:
                raise ModelLoadError(f"{source}: quantized tensor {module} has no biases")
            bits = _quant_bits(value, scales, name, source)
            if keep_quantized:
                weights[name] = value
                weights[f"{module}.scales"] = scales
                weights[f"{module}.biases"] = biases
                bits_by_module[module] = bits
            else:
                # fp16 arithmetic is emulated on CPU: widen scales/biases first (3x faster
                # load) so the result is float32 directly.
                weights[name] = mx.dequantize(value, scales.astype(mx.float32),
                                              biases.astype(mx.float32),
                                              group_size=GROUP_SIZE, bits=bits)
        elif widen and value.dtype in (mx.float16, mx.bfloat16) \
                and not name.endswith((".scales", ".biases")):
            weights[name] = value.astype(mx.float32)
        else:
            weights[name] = value
    return weights, bits_by_module


def _materialize(weights: dict[str, mx.array], report: ProgressReporter) -> None:
    """Evaluate the (lazily dequantized) weights one transformer layer at a time, reporting
    each: the load's longest step, so the progress bar moves through it. Same arrays and
    the same total work as one mx.eval at the end."""
    groups: dict[str, list[mx.array]] = {}
    for name, value in weights.items():
        m = re.match(r"^model\.layers\.(\d+)\.", name)
        groups.setdefault(m.group(1) if m else "", []).append(value)
    for i, arrays in enumerate(groups.values()):
        mx.eval(arrays)
        report("converting layers", (i + 1) / len(groups))


def _apply_rope_freqs(model: llama.Model, freqs: mx.array, args: llama.ModelArgs) -> None:
    dims = args.head_dim
    base = args.rope_theta ** (mx.arange(0, dims, 2, dtype=mx.float32) / dims)
    scaled = base * freqs.astype(mx.float32)
    for layer in model.model.layers:
        layer.self_attn.rope._freqs = scaled


def _display_name(path: Path, meta: dict[str, Any]) -> tuple[str, str]:
    ftype = _FILE_TYPES.get(int(_scalar(meta.get("general.file_type", -1))), "")
    stem = path.name.removesuffix(".gguf")
    for sep in (".", "-", "_"):
        if ftype and stem.upper().endswith(f"{sep}{ftype}"):
            stem = stem[: -len(ftype) - 1]
            break
    return stem, ftype


def load_gguf(path: Path, quantized: bool | None = None,
              report: ProgressReporter | None = None,
              cpu: CpuOptions | None = None) -> dict[str, Any]:
    """Fields of a LoadedModel for a GGUF file (the caller builds the dataclass)."""
    report = report or ProgressReporter(None)
    source = str(path)
    report("reading file", 0.0)
    tensors, meta = read_gguf(path)
    report("converting layers", 0.0)
    args = _model_args(meta, tensors, source)
    if "token_embd.weight" not in tensors:
        raise ModelLoadError(f"{source}: GGUF holds no model weights ({len(tensors)} tensors, "
                             "no token_embd.weight); is it a vocab-only file?")
    keep_quantized = resolve_quantized(quantized, cpu)
    weights, bits_by_module = _convert_weights(tensors, keep_quantized, widen_floats(quantized),
                                               source)
    _materialize(weights, report)

    model = llama.Model(args)
    if bits_by_module:
        # Per-module bits: the SmolLM2 Q4_1 file has 4-bit linears and an 8-bit embedding
        # (a QuantizedEmbedding, reused for the tied output through as_linear).
        nn.quantize(model, group_size=GROUP_SIZE, bits=4,
                    class_predicate=lambda p, m: (
                        {"group_size": GROUP_SIZE, "bits": bits_by_module[p]}
                        if p in bits_by_module else False))
    model.eval()
    try:
        model.load_weights(list(weights.items()), strict=True)
    except ValueError as e:
        # mlx lists every missing/unexpected name; keep the message to a few lines.
        lines = str(e).splitlines()
        msg = "\n".join(lines[:6]) + (f"\n... ({len(lines) - 6} more)" if len(lines) > 6 else "")
        raise ModelLoadError(f"{source}: GGUF tensors do not fit the llama model: {msg}") from e
    if "rope_freqs.weight" in tensors:
        _apply_rope_freqs(model, tensors["rope_freqs.weight"], args)
    mx.eval(model.parameters())

    report("tokenizer", 0.0)
    hf_tok = build_gguf_tokenizer(meta, source)
    vocab = hf_tok.get_vocab()
    eos_ids = [_scalar(meta.get(k)) for k in ("tokenizer.ggml.eos_token_id",
                                              "tokenizer.ggml.eot_token_id",
                                              "tokenizer.ggml.eom_token_id")]
    eos = end_token_ids(eos_ids, vocab, hf_tok.all_special_tokens)
    tokenizer = TokenizerWrapper(hf_tok, detokenizer_class=BPEStreamingDetokenizer,
                                 eos_token_ids=sorted(eos))
    name, ftype = _display_name(path, meta)
    kind = f"{ftype} GGUF" if ftype else "GGUF"
    return {
        "model": model,
        "tokenizer": tokenizer,
        "eos_token_ids": eos,
        "context_length": args.max_position_embeddings,
        "source": source,
        "description": f"{name} {kind}, {weights_description(model)} on {device_name()}",
    }
