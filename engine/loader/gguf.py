"""Load a GGUF file into mlx-lm's model for its architecture.

The file is read with gguf-py (gguf_file.py), its architecture becomes an mlx-lm config and
a map from parameters to tensors (gguf_arch.py), and its tensors become the model's arrays,
kept quantized in an exact affine form (ggml_types.py, gguf_weights.py) or float32 where
the engine will not run quantized weights (the CPU without its native kernels).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.models.switch_layers import SwitchLinear
from mlx_lm.tokenizer_utils import (
    BPEStreamingDetokenizer,
    NaiveStreamingDetokenizer,
    StreamingDetokenizer,
    TokenizerWrapper,
)

from ..cpu_options import CpuOptions
from .common import (
    END_OF_TURN_TOKENS,
    device_name,
    end_token_ids,
    on_cpu,
    packs_weights,
    resolve_quantized,
    weights_description,
    widen_floats,
)
from .errors import ModelLoadError
from .ggml_modules import Group16Embedding, Group16Linear, Group16SwitchLinear
from .gguf_arch import (
    Arch,
    architecture,
    gguf_names,
    hf_config,
    model_classes,
    rope_row_order,
    split_gate_up_experts,
    uses_traditional_rope,
)
from .gguf_file import GgufFile, check_gguf_header, read_gguf_file
from .gguf_linear_attn import column_orders, fix_file, row_orders
from .gguf_shortconv import unsqueeze_kernels
from .gguf_tokenizer import build_gguf_tokenizer, is_byte_level
from .gguf_weights import Converted, Quantized, Undo, convert
from .packed_form import attach, prepacked
from .progress import ProgressReporter
from .support import GGUF_FILE_TYPES, gguf_refusal

log = logging.getLogger(__name__)

__all__ = ["check_gguf_header", "load_gguf", "read_gguf_file"]

# Tensors read into the config or the RoPE rather than into a parameter.
_CONSUMED = re.compile(r"^(rope_freqs|rope_factors_(long|short))\.weight$")
_NORM = re.compile(r"norm\.weight$")
_QK = re.compile(r"^blk\.\d+\.attn_[qk]\.(weight|bias)$")


def _undo(f: GgufFile, arch: Arch, config: dict[str, Any], traditional: bool) -> dict[str, Undo]:
    """What the converter did to each tensor, by GGUF name."""
    out: dict[str, Undo] = {}
    unpermute = arch.interleaved_rope and not traditional
    head_dim = config["head_dim"]
    for name in f.tensors:
        order = None
        if unpermute and _QK.match(name):
            rows = f.tensors[name].shape[0]
            order = rope_row_order(rows, rows // head_dim)
        subtract = arch.norm_offset if arch.norm_offset and _NORM.search(name) else 0.0
        if order is not None or subtract:
            out[name] = Undo(order, subtract)
    if arch.linear_attention:  # value heads back in Hugging Face's order
        for name, order in row_orders(f, config).items():
            out[name] = Undo(order, out[name].subtract if name in out else 0.0)
    return out


def _reorder_columns(converted: Converted, config: dict[str, Any]) -> None:
    """Put back the input columns the converter moved a head at a time (Qwen 3.5's
    ssm_out, gguf_linear_attn.column_orders), in the converted arrays: a head's columns are
    whole words of the packed values and whole groups of the scales, so a quantized
    weight stays as it is, only moved."""
    found = column_orders(config)
    if found is None:
        return
    pattern, order, width = found
    for module in {n.rpartition(".")[0] for n in converted.weights}:
        if not pattern.search(module):
            continue
        form = converted.modules.get(module)
        parts = [("weight", width * form.bits // 32), ("scales", width // form.group),
                 ("biases", width // form.group)] if form is not None else [("weight", width)]
        if form is not None and (width * form.bits % 32 or width % form.group):
            raise ModelLoadError(f"{module}: a value head ({width} columns) is not whole "
                                 f"groups of its {form.group}-wide quantized form")
        index = mx.array(order)
        for leaf, per_head in parts:
            w = converted.weights[f"{module}.{leaf}"]
            rows = w.shape[:-1]
            heads = w.reshape(*rows, len(order), per_head)
            converted.weights[f"{module}.{leaf}"] = mx.take(heads, index, axis=-2).reshape(
                *rows, len(order) * per_head)


def _quantize_modules(model: nn.Module, forms: dict[str, Quantized],
                      weights: dict[str, mx.array]) -> None:
    """Turn the modules whose tensors are kept quantized into quantized modules."""
    g32 = {p: q for p, q in forms.items() if q.group != 16}
    if g32:
        nn.quantize(model, group_size=32, bits=4, class_predicate=lambda p, m: (
            {"group_size": g32[p].group, "bits": g32[p].bits} if p in g32 else False))
    modules = dict(model.named_modules())
    new = []
    for path, form in forms.items():
        if form.group != 16:
            continue
        stock = modules[path]
        w, s, b = (weights[f"{path}.{k}"] for k in ("weight", "scales", "biases"))
        bias = weights.get(f"{path}.bias")
        if isinstance(stock, nn.Embedding):
            new.append((path, Group16Embedding(w, s, b, form.bits)))
        elif w.ndim == 3:
            new.append((path, Group16SwitchLinear(w, s, b, form.bits, bias)))
        else:
            new.append((path, Group16Linear(w, s, b, form.bits, bias)))
    if new:
        model.update_modules(tree_unflatten(new))


def _apply_rope_freqs(model: nn.Module, freqs: np.ndarray, config: dict[str, Any]) -> None:
    dims = config["head_dim"]
    base = config["rope_theta"] ** (mx.arange(0, dims, 2, dtype=mx.float32) / dims)
    scaled = base * mx.array(freqs, dtype=mx.float32)
    for _, m in model.named_modules():
        if hasattr(m, "_freqs") and m.__class__.__name__ == "Llama3RoPE":
            m._freqs = scaled


def _display_name(path: Path, meta: dict[str, Any]) -> tuple[str, str]:
    ftype = GGUF_FILE_TYPES.get(int(meta.get("general.file_type", -1)), "")
    stem = path.name.removesuffix(".gguf")
    for sep in (".", "-", "_"):
        if ftype and stem.upper().endswith(f"{sep}{ftype}"):
            stem = stem[: -len(ftype) - 1]
            break
    return stem, ftype


def _packed_modules(model: nn.Module, config: dict[str, Any], arch: Arch) -> frozenset[str]:
    """The modules the engine's packed kernel will run (plain linears and embeddings:
    engine/native/layers.py; an embedding's lookup then reads the packed copy too; a MoE's
    stacked experts: engine/native/switch_layers.py), less those whose columns the loader
    still moves (Qwen 3.5's ssm_out)."""
    moved = column_orders(config) if arch.linear_attention else None
    return frozenset(p for p, m in model.named_modules()
                     if type(m) in (nn.Linear, nn.Embedding, SwitchLinear)
                     and not (moved is not None and moved[0].search(p)))


def _restore_unit_axes(model: nn.Module, weights: dict[str, mx.array]) -> None:
    """A weight whose shape is its parameter's less axes of size 1 takes the parameter's
    shape. ggml drops a tensor's trailing size-1 dimensions when it writes one again, so
    llama-quantize turns Qwen 3.5 MoE's shared-expert gate, (1, hidden) as the converter
    writes it, into (hidden,): every quantized file of that architecture has it so."""
    shapes = {n: p.shape for n, p in tree_flatten(model.parameters())}
    for name, w in weights.items():
        want = shapes.get(name)
        if want is not None and w.shape != want and w.size == int(np.prod(want)) \
                and [d for d in w.shape if d != 1] == [d for d in want if d != 1]:
            weights[name] = w.reshape(want)


def _build(f: GgufFile, keep_quantized: bool, quantized: bool | None,
           report: ProgressReporter, pack: bool = False,
           meanwhile: Callable[[], None] | None = None
           ) -> tuple[nn.Module, dict[str, Any], list[str]]:
    source = str(f.path)
    arch = architecture(f)
    f = split_gate_up_experts(f)  # mlx-lm holds the gate and up experts apart
    if "token_embd.weight" not in f.tensors:
        raise ModelLoadError(f"{source}: GGUF holds no model weights ({len(f.tensors)} tensors, "
                             "no token_embd.weight); is it a vocab-only file?")
    config = hf_config(f, arch)
    if arch.linear_attention:  # A, dt and conv1d as Hugging Face has them, no MTP blocks
        f = fix_file(f, config)
    if arch.short_convolutions:  # LFM2's kernels as mlx-lm's Conv1d holds them
        f = unsqueeze_kernels(f)
    model_cls, args_cls = model_classes(config, source)
    traditional = arch.interleaved_rope and uses_traditional_rope(args_cls)
    if traditional:
        config["rope_traditional"] = True  # GGUF's q/k rows are in adjacent pairs
    try:
        model = model_cls(args_cls.from_dict(config))
    except (TypeError, ValueError, KeyError) as e:
        raise ModelLoadError(f"{source}: mlx-lm's {config['model_type']} model does not take "
                             f"this file's settings: {e}") from e
    if config.get("tie_word_embeddings") and "lm_head" in model \
            and hasattr(model, "tie_word_embeddings"):
        # mlx-lm's Gemma 3 always builds a head and drops it in sanitize when the weights
        # hold none; a tied file (Google's Gemma 3 checkpoints) has no output.weight
        model.tie_word_embeddings = True
        model.pop("lm_head")
    params = [n for n, _ in tree_flatten(model.parameters())]
    names = gguf_names(f, params, arch.tensors)
    absent = [p for p in params if names.get(p) not in f.tensors]
    if absent:
        shown = ", ".join(f"{p} ({names.get(p, 'no GGUF name')})" for p in absent[:4])
        raise ModelLoadError(f"{source}: GGUF tensors do not fit mlx-lm's "
                             f"{config['model_type']} model: missing {shown}"
                             + (f" and {len(absent) - 4} more" if len(absent) > 4 else ""))
    used = set(names.values())
    extra = [n for n in f.tensors if n not in used and not _CONSUMED.match(n)]
    if extra:
        raise ModelLoadError(f"{source}: unexpected GGUF tensor {extra[0]!r} for mlx-lm's "
                             f"{config['model_type']} model ({len(extra)} such)")
    report("converting layers", 0.1)
    converted: Converted = convert(
        f, {p: names[p] for p in params}, _undo(f, arch, config, traditional),
        keep_quantized=keep_quantized, widen=widen_floats(quantized), on_cpu=on_cpu(),
        pack=_packed_modules(model, config, arch) if pack and keep_quantized else frozenset(),
        meanwhile=meanwhile)
    if arch.linear_attention:
        _reorder_columns(converted, config)
    _quantize_modules(model, converted.modules, converted.weights)
    _restore_unit_axes(model, converted.weights)
    model.eval()
    try:
        model.load_weights(list(converted.weights.items()), strict=True)
    except ValueError as e:
        lines = str(e).splitlines()
        msg = "\n".join(lines[:6]) + (f"\n... ({len(lines) - 6} more)" if len(lines) > 6 else "")
        raise ModelLoadError(f"{source}: GGUF tensors do not fit mlx-lm's "
                             f"{config['model_type']} model: {msg}") from e
    if converted.prepacked:
        modules = dict(model.named_modules())
        for path, pk in converted.prepacked.items():
            attach(modules[path], pk)
    if "rope_freqs.weight" in f.tensors and (config.get("rope_scaling") or {}).get(
            "rope_type") == "llama3":  # Gemma 4's is read into its config (gguf_arch.py)
        _apply_rope_freqs(model, np.asarray(f.tensors["rope_freqs.weight"].data), config)
    _materialize(model, report)
    for note in converted.notes:
        log.warning("%s: %s", f.path.name, note)
    return model, config, converted.notes


def _materialize(model: nn.Module, report: ProgressReporter) -> None:
    """Evaluate the weights a layer at a time, reporting each (the load's longest step).
    A prepacked module's arrays stay lazy views (packed_form.py): made only if used."""
    lazy = {id(v) for _, m in model.named_modules() if prepacked(m) is not None
            for v in (m["weight"], m["scales"], m["biases"])}
    groups: dict[str, list[mx.array]] = {}
    for name, value in tree_flatten(model.parameters()):
        if id(value) in lazy:
            continue
        m = re.search(r"\.layers\.(\d+)\.", name)
        groups.setdefault(m.group(1) if m else "", []).append(value)
    for i, arrays in enumerate(groups.values()):
        mx.eval(arrays)
        report("converting layers", 0.1 + 0.9 * (i + 1) / len(groups))


def _token_map(hf_tok: Any, vocab: dict[str, int], meta: dict[str, Any]) -> list[str]:
    """convert_ids_to_tokens of every id, from the GGUF's token list: the token at its id,
    where the vocabulary gives it that id (a duplicate string keeps its first id, so a later
    one asks the tokenizer, as do ids past the list)."""
    tokens = meta.get("tokenizer.ggml.tokens") or []
    out = [t if vocab.get(t) == i else hf_tok.convert_ids_to_tokens(i)
           for i, t in enumerate(tokens)]
    out += hf_tok.convert_ids_to_tokens(list(range(len(out), len(hf_tok))))
    return out


def _bpe_detokenizer(token_map: list[str]) -> type[BPEStreamingDetokenizer]:
    """mlx-lm's BPE streaming detokenizer with its id → token map given, not asked of the
    tokenizer an id at a time (~0.15 s for 152k ids)."""

    class GgufBPEStreamingDetokenizer(BPEStreamingDetokenizer):
        def __init__(self, tokenizer: Any) -> None:  # noqa: ARG002 - the map is given
            StreamingDetokenizer.__init__(self)
            self.tokenmap = token_map
            self.reset()

    return GgufBPEStreamingDetokenizer


def _tokenizer(meta: dict[str, Any], source: str) -> tuple[TokenizerWrapper, frozenset[int]]:
    """mlx-lm's wrapper of the GGUF's tokenizer, and every end-of-turn id."""
    hf_tok = build_gguf_tokenizer(meta, source)
    # the end-of-turn markers' ids, without building the whole vocabulary's dict (152k
    # entries for Qwen: a quarter of a second each time)
    marks = {t: i for t in END_OF_TURN_TOKENS
             if (i := hf_tok.convert_tokens_to_ids(t)) is not None
             and hf_tok.convert_ids_to_tokens(i) == t}  # not the unknown token's id
    eos_ids = [meta.get(k) for k in ("tokenizer.ggml.eos_token_id",
                                     "tokenizer.ggml.eot_token_id",
                                     "tokenizer.ggml.eom_token_id")]
    eos = end_token_ids(eos_ids, marks, hf_tok.all_special_tokens)
    # byte-level BPE streams through mlx-lm's BPE detokenizer; any other vocabulary through
    # its naive one (the tokenizer's own decode, so the same text)
    # mlx-lm's wrapper reads the whole vocabulary twice (a dict of 152k entries for Qwen,
    # ~0.1 s each): it gets one, read once, for as long as it is built
    vocab = hf_tok.get_vocab()
    detokenizer = (_bpe_detokenizer(_token_map(hf_tok, vocab, meta)) if is_byte_level(meta)
                   else NaiveStreamingDetokenizer)
    hf_tok.get_vocab = lambda: vocab
    try:
        tokenizer = TokenizerWrapper(hf_tok, detokenizer_class=detokenizer,
                                     eos_token_ids=sorted(eos))
    finally:
        del hf_tok.get_vocab
    return tokenizer, eos


def load_gguf(path: Path, quantized: bool | None = None,
              report: ProgressReporter | None = None,
              cpu: CpuOptions | None = None) -> dict[str, Any]:
    """Fields of a LoadedModel for a GGUF file (the caller builds the dataclass)."""
    report = report or ProgressReporter(None)
    source = str(path)
    report("reading file", 0.0)
    f = read_gguf_file(path)
    # the model library's reasons, word for word (support.py), before any conversion
    reason = gguf_refusal(f.metadata.get("general.architecture"),
                          {int(t.kind) for t in f.tensors.values()}, f.tensors.keys(),
                          f.arch_value, f.metadata.get("tokenizer.ggml.model"))
    if reason:
        raise ModelLoadError(f"{source}: {reason}")
    report("converting layers", 0.0)
    keep_quantized = resolve_quantized(quantized, cpu)
    # The tokenizer is built here while the weights are decoded on the native decoder's
    # threads (one call without the GIL: gguf_weights.convert): ~0.5 s of a 1.5B's load
    made: list[tuple[TokenizerWrapper, frozenset[int]]] = []
    model, config, notes = _build(f, keep_quantized, quantized, report,
                                  pack=on_cpu() and packs_weights(cpu),
                                  meanwhile=lambda: made.append(_tokenizer(f.metadata, source)))
    report("tokenizer", 0.0)
    tokenizer, eos = made[0] if made else _tokenizer(f.metadata, source)
    meta = f.metadata
    name, ftype = _display_name(path, meta)
    kind = f"{ftype} GGUF" if ftype else "GGUF"
    return {
        "model": model,
        "tokenizer": tokenizer,
        "eos_token_ids": eos,
        "context_length": int(config["max_position_embeddings"]),
        "source": source,
        "description": f"{name} {kind}, {weights_description(model)} on {device_name()}",
        "notes": tuple(notes),
    }
