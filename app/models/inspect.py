"""What one model on the disk is, read from its headers and config, never its weights.

describe() takes a .gguf file or an mlx-lm model directory and returns its ModelEntry,
with the reason it does not load here (the loader's rules come from engine.public); a
broken or partial file is an entry with a reason, never an exception.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import replace
from math import prod
from pathlib import Path
from typing import Any

from engine.public import (
    MemoryNeed,
    gguf_memory,
    gguf_refusal,
    is_vision_config,
    mlx_lm_unsupported,
    mmproj_beside,
    projector_refusal,
    vision_refusal,
)

from .entry import ModelEntry
from .gguf_header import GgufError, read_gguf_header
from .safetensors_header import SafetensorsError, Tensor, read_safetensors_header

CONTEXT_KEYS = ("max_position_embeddings", "max_seq_len", "n_positions", "seq_length")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")
DTYPE_NAMES = {"BF16": "bf16", "F16": "f16", "F32": "f32", "F64": "f64",
               "bfloat16": "bf16", "float16": "f16", "float32": "f32"}


def describe(path: Path, *, name: str, place: str, source: str | None = None) -> ModelEntry:
    """The entry for a .gguf file or a model directory at `path`."""
    base = {"name": name, "place": place, "path": path, "source": source or str(path)}
    try:
        if path.is_dir():
            return _describe_dir(path, base)
        return _describe_gguf(path, base)
    except OSError as e:  # unreadable (permissions, I/O, a broken link)
        return ModelEntry(format="GGUF" if path.suffix == ".gguf" else "mlx-lm",
                          reason=f"cannot read {e.filename or path}: {e.strerror or e}", **base)


def _describe_gguf(path: Path, base: dict[str, Any]) -> ModelEntry:
    size = path.stat().st_size
    try:
        header = read_gguf_header(path)
    except GgufError as e:
        return ModelEntry(format="GGUF", size_bytes=size, reason=str(e), **base)
    reason = gguf_refusal(header.architecture, header.tensor_types, header.tensor_names,
                          header.arch_value, header.metadata.get("tokenizer.ggml.model"),
                          data_end=header.data_end, size=size)
    context = header.arch_value("context_length")
    context = context if isinstance(context, int) else None
    projector = mmproj_beside(path)
    return ModelEntry(format="GGUF", architecture=header.architecture or "",
                      parameters=header.parameters or None, quantization=header.quantization,
                      size_bytes=size, context_length=context, reason=reason,
                      note=base.pop("note", "") or ("" if reason else _memory(header, context,
                                                                               path)),
                      sees_images=projector is not None,
                      images_reason=_projector_reason(projector, header.architecture)
                      if projector else "",
                      **base)


def _projector_reason(projector: Path, architecture: str | None) -> str:
    """Why the mmproj beside a GGUF gives it no images here ("" when the pair loads:
    engine/vision/mmproj.py), from the projector's header."""
    try:
        metadata = read_gguf_header(projector).metadata
    except (GgufError, OSError) as e:
        return f"its projector {projector.name} is unreadable ({e}): it runs reading text only"
    reason = projector_refusal(metadata, architecture)
    return f"{projector.name}: {reason}: it runs here reading text only" if reason else ""


def _memory(header: Any, context: int | None, path: Path) -> str:
    """What the model will take once loaded ("" when the header cannot say)."""
    need = _header_need(header, context, path)
    return need.describe() if need is not None else ""


def _header_need(header: Any, context: int | None, path: Path) -> MemoryNeed | None:
    width = kv_width(header)
    if not width:
        return None
    need = gguf_memory(header.tensor_types, layers=1, kv_heads=width, head_dim=1,
                       context=min(context or 4096, 1 << 20),
                       state_per_sequence=recurrent_state_bytes(header))
    return replace(need, weights=need.weights + _projector_bytes(path, header.architecture))


def _projector_bytes(path: Path, architecture: str | None) -> int:
    """The vision tower and projector the mmproj beside a GGUF adds once loaded with it
    (engine/vision/mmproj.py holds them float32); 0 when none pairs with it."""
    projector = mmproj_beside(path)
    if projector is None:
        return 0
    try:
        header = read_gguf_header(projector)
    except (GgufError, OSError):
        return 0
    return 0 if projector_refusal(header.metadata, architecture) else 4 * header.parameters


def memory_need(path: Path) -> MemoryNeed | None:
    """What the GGUF at `path` will take once loaded (weights, packed copy, the default KV
    budget), from its header alone; None for a directory, a broken file or a header that
    cannot say (the model manager then counts the files' size)."""
    if path.is_dir():
        return None
    try:
        header = read_gguf_header(path)
    except (GgufError, OSError):
        return None
    context = header.arch_value("context_length")
    return _header_need(header, context if isinstance(context, int) else None, path)


def kv_width(header: Any) -> int:
    """Keys (= values) a token adds to the KV over all layers, from the header (0: unknown).
    Per layer, for Gemma 4: KV heads and head sizes differ between sliding and full layers,
    and the last `shared_kv_layers` read an earlier layer's KV instead of keeping their own."""
    def number(key: str) -> int | None:
        value = header.arch_value(key)
        return value if isinstance(value, int) and value > 0 else None

    layers, heads = number("block_count"), number("attention.head_count")
    hidden = number("embedding_length")
    head_dim = number("attention.key_length") or (hidden // heads if hidden and heads else None)
    if not (layers and heads and head_dim):
        return 0
    kv = header.arch_value("attention.head_count_kv")
    kv_heads = kv if isinstance(kv, list) else [number("attention.head_count_kv") or heads] * layers
    sliding = header.arch_value("attention.sliding_window_pattern")
    swa_dim = number("attention.key_length_swa") or head_dim
    dims = ([swa_dim if s else head_dim for s in sliding] if isinstance(sliding, list)
            else [head_dim] * layers)
    own = layers - (number("attention.shared_kv_layers") or 0)
    attends = _attention_layers(header, layers)
    return sum(h * d for h, d, a in zip(kv_heads[:own], dims[:own], attends, strict=False)
               if a)


def _linear_attention(header: Any) -> tuple[int, int] | None:
    """A hybrid model's (layers run, full attention interval), from the header (Qwen 3.5:
    src/models/qwen35.cpp reads the same keys); None for a model of attention layers only."""
    kernel, layers = header.arch_value("ssm.conv_kernel"), header.arch_value("block_count")
    if not isinstance(kernel, int) or not isinstance(layers, int):
        return None
    mtp = header.arch_value("nextn_predict_layers")  # MTP blocks: not run by mlx-lm's model
    interval = header.arch_value("full_attention_interval")
    recurrent = header.arch_value("attention.recurrent_layers")  # the loader reads it first
    if isinstance(recurrent, list) and not all(recurrent):
        interval = next(i + 1 for i, r in enumerate(recurrent) if not r)
    return (layers - (mtp if isinstance(mtp, int) else 0),
            interval if isinstance(interval, int) and interval > 0 else 4)


def _attention_layers(header: Any, layers: int) -> list[bool]:
    """Which layers keep a per-token KV: all but a hybrid model's recurrent layers (whose
    state has a fixed size a sequence, `recurrent_state_bytes`) and its MTP blocks."""
    hybrid = _linear_attention(header)
    if hybrid is None:
        return [True] * layers
    run, interval = hybrid
    return [i < run and (i + 1) % interval == 0 for i in range(layers)]


def recurrent_state_bytes(header: Any) -> int:
    """A hybrid model's recurrent state for one sequence, float32 (0 for other models): each
    Gated DeltaNet layer keeps its convolution's last kernel - 1 inputs and a value-by-key
    matrix a value head (mlx-lm's ArraysCache), whatever the sequence's length."""
    hybrid = _linear_attention(header)
    sizes = [header.arch_value(f"ssm.{k}") for k in
             ("conv_kernel", "state_size", "group_count", "time_step_rank", "inner_size")]
    if hybrid is None or not all(isinstance(v, int) and v > 0 for v in sizes):
        return 0
    kernel, key_dim, key_heads, value_heads, inner = sizes
    run, interval = hybrid
    recurrent = sum(1 for i in range(run) if (i + 1) % interval != 0)
    conv = (kernel - 1) * (2 * key_heads * key_dim + inner)
    return recurrent * 4 * (conv + inner * key_dim)


def _describe_dir(path: Path, base: dict[str, Any]) -> ModelEntry:
    size = dir_size(path)
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        return ModelEntry(format="mlx-lm", size_bytes=size,
                          reason=f"config.json is unreadable ({e})", **base)
    arch = config.get("model_type") if isinstance(config.get("model_type"), str) else ""
    weights, reason = _weights(path)
    if not reason and not any((path / f).is_file() for f in TOKENIZER_FILES):
        reason = "no tokenizer files (tokenizer.json)"
    # a VLM (#52): loaded through mlx-vlm, whatever mlx-lm thinks of its model_type
    # (a family whose images do not run here yet loads its text through mlx-lm, if it can)
    vlm = is_vision_config(config) or (path / "preprocessor_config.json").is_file()
    images_reason = (vision_refusal(arch, config) or "") if vlm else ""
    if not vlm or images_reason:
        reason = mlx_lm_unsupported(arch) or reason
    return ModelEntry(format="mlx-vlm" if vlm and not images_reason else "mlx-lm",
                      architecture=arch, parameters=_parameters(weights, config),
                      quantization=_quantization(config, weights), size_bytes=size,
                      context_length=_context(path, config), reason=reason,
                      sees_images=vlm, images_reason=images_reason, **base)


def _weights(path: Path) -> tuple[dict[str, Tensor], str]:
    """Every tensor of the directory's safetensors, and why they do not load ("" if they do)."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            files = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"]
                               .values()))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            return {}, f"model.safetensors.index.json is unreadable ({e})"
    else:
        files = sorted(p.name for p in path.glob("*.safetensors"))
    if not files:
        return {}, "missing weights (no *.safetensors file)"
    tensors: dict[str, Tensor] = {}
    for file in files:
        if not (path / file).is_file():
            return tensors, f"missing weights ({file})"
        try:
            tensors |= read_safetensors_header(path / file)
        except SafetensorsError as e:
            return tensors, f"broken weights: {e}"
    return tensors, ""


def _parameters(weights: dict[str, Tensor], config: dict[str, Any]) -> int | None:
    quant = _quant_config(config)
    total = 0
    for name, t in weights.items():
        if name.endswith((".scales", ".biases")):
            continue
        n = prod(t.shape)
        module = name.rsplit(".", 1)[0]
        if f"{module}.scales" in weights and quant:  # packed: 32 / bits weights per uint32
            own = quant.get(module) if isinstance(quant.get(module), dict) else quant
            bits = own.get("bits") or quant.get("bits") or 4
            n = n * 32 // int(bits)
        total += n
    return total or None


def _quant_config(config: dict[str, Any]) -> dict[str, Any]:
    for key in ("quantization", "quantization_config"):
        if isinstance(config.get(key), dict):
            return config[key]
    return {}


def _quantization(config: dict[str, Any], weights: dict[str, Tensor]) -> str:
    quant = _quant_config(config)
    if isinstance(quant.get("bits"), int):
        group = quant.get("group_size")
        return f"{quant['bits']}-bit" + (f" g{group}" if isinstance(group, int) else "")
    if quant.get("quant_method"):
        return str(quant["quant_method"])
    sizes: Counter[str] = Counter()
    for t in weights.values():
        if t.dtype in DTYPE_NAMES:
            sizes[t.dtype] += prod(t.shape)
    if sizes:
        return DTYPE_NAMES[sizes.most_common(1)[0][0]]
    dtype = config.get("torch_dtype") or config.get("dtype")
    return DTYPE_NAMES.get(dtype, "") if isinstance(dtype, str) else ""


def _context(path: Path, config: dict[str, Any]) -> int | None:
    """As engine/loader/mlx_dir.py decides it: the config's, else the tokenizer's limit."""
    for cfg in (config, config.get("text_config") or {}):
        for key in CONTEXT_KEYS:
            if isinstance(cfg, dict) and isinstance(cfg.get(key), int) and cfg[key] > 0:
                return cfg[key]
    try:
        limit = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8")) \
            .get("model_max_length")
    except (OSError, ValueError, AttributeError):
        return None
    return limit if isinstance(limit, int) and 0 < limit < 10**7 else None


def dir_size(path: Path) -> int:
    """Bytes of the files under `path` (through links, so a hub snapshot counts its blobs)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for file in files:
            try:
                total += os.stat(os.path.join(root, file)).st_size
            except OSError:
                pass  # a broken link: a missing file, said by the reason
    return total
