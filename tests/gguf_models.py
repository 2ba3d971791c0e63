"""Tiny random-weight models of every GGUF architecture the loader takes, written as GGUF
files the way llama.cpp's convert_hf_to_gguf.py writes them (issue #45's CI tests).

Each architecture has a Hugging Face-style config. mlx-lm builds the model from it with
random weights (the reference), and ``write_gguf`` writes those weights with gguf-py's
GGUFWriter: tensor names from gguf-py's name map, q/k rows permuted where the converter
permutes them (LlamaModel.permute), Gemma's norm weights stored plus one, and the metadata
keys its set_gguf_parameters writes. tests/engine/test_gguf_converter_parity.py holds this
writer to llama.cpp's own converter on the same weights where a checkout has it.

``quantize`` replaces the linears' weights by random blocks of a GGML type (every bit
pattern with finite fp16 scales is a valid block), so quantized files need no quantizer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gguf
import mlx.core as mx
import mlx.nn as nn
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.tokenizer_utils import _byte_decoder

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["h e", "Ġ t", "Ġt he", "1 2", "e r", "Ġ a"]


def vocab() -> tuple[list[str], list[int]]:
    """3 control tokens, the 256 byte-level symbols, then the merge results."""
    byte_syms = sorted(_byte_decoder(), key=lambda c: _byte_decoder()[c])
    tokens = SPECIALS + byte_syms + [m.replace(" ", "") for m in MERGES]
    return tokens, [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))


VOCAB = len(vocab()[0])
BASE = {"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 96,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
        "vocab_size": VOCAB, "rope_theta": 10000.0, "max_position_embeddings": 512,
        "tie_word_embeddings": False}


@dataclass(frozen=True)
class ArchCase:
    """An architecture: its GGUF name, HF-style config and what the converter does."""

    gguf_arch: str
    config: dict[str, Any]
    permute_qk: bool = False  # conversion/llama.py: LlamaModel.permute (undo_permute)
    norm_shift: float = 0.0  # conversion/gemma.py: norm_shift
    metadata: Callable[[GGUFWriter, dict[str, Any]], None] | None = None
    # tensors the converter writes beside the parameters (Phi-3.5's rope factors)
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    # Hugging Face names (their ending) the converter renames itself, gguf-py's map having
    # none for them: the GGUF tensor and suffix it writes
    renames: dict[str, tuple[gguf.MODEL_TENSOR, str]] = field(default_factory=dict)
    # what the converter's modify_tensors does to a tensor's values, by its GGUF name
    transform: Callable[[str, np.ndarray, dict[str, Any]], np.ndarray] | None = None


def _cfg(model_type: str, **kw: Any) -> dict[str, Any]:
    return {**BASE, "model_type": model_type, **kw}


def _llama_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    w.add_vocab_size(c["vocab_size"])
    w.add_rope_dimension_count(c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"])


MROPE = {"type": "mrope", "mrope_section": [2, 3, 3]}


def qwen2vl_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    """conversion/base.py: the (t, h, w) M-RoPE sections, padded to 4."""
    w.add_rope_dimension_sections([*c["rope_scaling"]["mrope_section"], 0])


def _key_length(w: GGUFWriter, c: dict[str, Any]) -> None:
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])


def lfm2_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    """conversion/lfm2.py LFM2Model.set_gguf_parameters: head_count_kv a layer (0 for a
    convolution layer), the convolution's cache length, the vocabulary size."""
    w.add_head_count_kv([c["num_key_value_heads"] if t == "full_attention" else 0
                         for t in c["layer_types"]])
    w.add_shortconv_l_cache(c["conv_L_cache"])
    w.add_vocab_size(c["vocab_size"])


def lfm2_tensor(name: str, w: np.ndarray, c: dict[str, Any]) -> np.ndarray:
    """LFM2Model.modify_tensors: a convolution kernel squeezed to (channels, width)."""
    return w.squeeze(1) if name.endswith(".shortconv.conv.weight") else w


def qwen3vl_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    """conversion/qwen3vl.py Qwen3VLTextModel: Qwen3's head size keys, the M-RoPE sections
    (padded to 4) and the DeepStack level count (its vision config's)."""
    _key_length(w, c)
    qwen2vl_meta(w, c)
    w.add_num_deepstack_layers(c["num_deepstack_layers"])


def _moe_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    _key_length(w, c)
    w.add_expert_count(c["num_experts"])
    w.add_expert_used_count(c["num_experts_per_tok"])
    w.add_expert_feed_forward_length(c["moe_intermediate_size"])


def _gemma2_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    _key_length(w, c)
    w.add_attn_logit_softcapping(c["attn_logit_softcapping"])
    w.add_final_logit_softcapping(c["final_logit_softcapping"])
    w.add_sliding_window(c["sliding_window"])


def _gemma3_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    _key_length(w, c)
    w.add_sliding_window(c["sliding_window"])
    w.add_rope_freq_base_swa(c["rope_local_base_freq"])
    scaling = c.get("rope_scaling")
    if scaling:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(scaling["factor"])


def _gemma4_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    """As conversion/gemma.py Gemma4Model writes it (per-layer arrays, two head sizes)."""
    swa = [t == "sliding_attention" for t in c["layer_types"]]
    first_shared = c["num_hidden_layers"] - c["num_kv_shared_layers"]
    full, local = c["rope_parameters"]["full_attention"], c["rope_parameters"]["sliding_attention"]
    w.add_final_logit_softcapping(c["final_logit_softcapping"])
    w.add_sliding_window(c["sliding_window"])
    w.add_shared_kv_layers(c["num_kv_shared_layers"])
    w.add_embedding_length_per_layer_input(c["hidden_size_per_layer_input"])
    w.add_sliding_window_pattern(swa)
    w.add_key_length(c["global_head_dim"])
    w.add_value_length(c["global_head_dim"])
    w.add_key_length_swa(c["head_dim"])
    w.add_value_length_swa(c["head_dim"])
    if c.get("use_double_wide_mlp"):
        w.add_feed_forward_length([c["intermediate_size"] * (1 if i < first_shared else 2)
                                   for i in range(c["num_hidden_layers"])])
    # transformers' Gemma4TextConfig gives full layers their own KV heads (per_layer_config)
    # only with attention_k_eq_v; the converter writes a per-layer array from it
    if c.get("attention_k_eq_v") and c.get("num_global_key_value_heads") is not None:
        w.add_head_count_kv([c["num_key_value_heads"] if s else c["num_global_key_value_heads"]
                             for s in swa])
    if c.get("enable_moe_block"):  # conversion/base.py TextModel.set_gguf_parameters
        w.add_expert_count(c["num_experts"])
        w.add_expert_used_count(c["top_k_experts"])
        w.add_expert_feed_forward_length(c["moe_intermediate_size"])
    w.add_rope_freq_base_swa(local["rope_theta"])
    w.add_rope_dimension_count(c["global_head_dim"])
    w.add_rope_dimension_count_swa(int(c["head_dim"] * local["partial_rotary_factor"]))
    w.add_rope_freq_base(full["rope_theta"])  # the full layers' (the writer's was rope_theta)


def _granite_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    _llama_meta(w, c)
    w.add_attention_scale(c["attention_multiplier"])
    w.add_embedding_scale(c["embedding_multiplier"])
    w.add_residual_scale(c["residual_multiplier"])
    w.add_logit_scale(c["logits_scaling"])


def _yarn(w: GGUFWriter, scaling: dict[str, Any]) -> None:
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(scaling["factor"])
    w.add_rope_scaling_orig_ctx_len(scaling["original_max_position_embeddings"])


def _gpt_oss_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    _key_length(w, c)
    w.add_sliding_window(c["sliding_window"])
    w.add_expert_count(c["num_local_experts"])
    w.add_expert_used_count(c["num_experts_per_tok"])
    w.add_expert_feed_forward_length(c["intermediate_size"])
    _yarn(w, c["rope_scaling"])


def _longrope_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    """conversion/phi.py Phi3MiniModel: the original context, and the attention factor
    sqrt(1 + ln(ratio) / ln(original)) from the context ratio (1.0 at none)."""
    original = c["original_max_position_embeddings"]
    ratio = c["max_position_embeddings"] / original
    w.add_rope_scaling_orig_ctx_len(original)
    w.add_rope_scaling_attn_factors(
        math.sqrt(1 + math.log(ratio) / math.log(original)) if ratio > 1.0 else 1.0)


def _ministral3_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    _llama_meta(w, c)
    p = c["rope_parameters"]
    _yarn(w, p)
    w.add_rope_scaling_yarn_beta_fast(p["beta_fast"])
    w.add_rope_scaling_yarn_beta_slow(p["beta_slow"])
    w.add_rope_scaling_yarn_log_mul(p["mscale_all_dim"])
    w.add_attn_temperature_scale(p["llama_4_scaling_beta"])


def _qwen35_meta(w: GGUFWriter, c: dict[str, Any]) -> None:
    """conversion/qwen.py Qwen3NextModel / _Qwen35MRopeMixin.set_gguf_parameters."""
    _key_length(w, c)
    w.add_ssm_conv_kernel(c["linear_conv_kernel_dim"])
    w.add_ssm_state_size(c["linear_key_head_dim"])
    w.add_ssm_group_count(c["linear_num_key_heads"])
    w.add_ssm_time_step_rank(c["linear_num_value_heads"])
    w.add_ssm_inner_size(c["linear_value_head_dim"] * c["linear_num_value_heads"])
    interval = c["full_attention_interval"]
    # gguf_writer.add_recurrent_layers (the installed gguf-py predates it)
    w.add_array(f"{w.arch}.attention.recurrent_layers",
                [(i + 1) % interval != 0 for i in range(c["num_hidden_layers"])])
    w.add_full_attention_interval(interval)
    rope = c["rope_parameters"]
    w.add_rope_dimension_count(int(c["head_dim"] * rope["partial_rotary_factor"]))
    w.add_rope_dimension_sections(list(rope["mrope_section"]) + [0])
    if c.get("num_experts"):
        w.add_expert_count(c["num_experts"])
        w.add_expert_used_count(c["num_experts_per_tok"])
        w.add_expert_feed_forward_length(c["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(c["shared_expert_intermediate_size"])


def _reorder_v_heads(t: np.ndarray, dim: int, k_heads: int, per: int,
                     head_dim: int) -> np.ndarray:
    """conversion/qwen.py _LinearAttentionVReorderBase._reorder_v_heads, in numpy."""
    shape = list(t.shape)
    dim %= len(shape)
    t = t.reshape(*shape[:dim], k_heads, per, head_dim, *shape[dim + 1:])
    return np.swapaxes(t, dim, dim + 1).reshape(shape)


def _qwen35_tensor(name: str, w: np.ndarray, c: dict[str, Any]) -> np.ndarray:
    """conversion/qwen.py: _LinearAttentionVReorderBase then Qwen3NextModel.modify_tensors,
    on the Hugging Face checkpoint's tensors (hf_parameters)."""
    hk, hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, per = c["linear_key_head_dim"], c["linear_value_head_dim"], hv // hk
    if name.endswith(".ssm_conv1d.weight"):
        w = w[:, 0]  # Hugging Face's (channels, 1, width), squeezed
    elif name.endswith("norm.weight") and not name.endswith(".ssm_norm.weight"):
        w = w + np.float32(1.0)  # zero-centred norms stored plus one
    if hk != hv:
        if name.endswith(".attn_qkv.weight"):
            w = np.concatenate([w[:2 * hk * dk],
                                _reorder_v_heads(w[2 * hk * dk:], 0, hk, per, dv)])
        elif name.endswith(".attn_gate.weight") and w.shape[0] == hv * dv:
            w = _reorder_v_heads(w, 0, hk, per, dv)
        elif name.endswith((".ssm_alpha.weight", ".ssm_beta.weight", ".ssm_a",
                            ".ssm_dt.bias")):
            w = _reorder_v_heads(w.reshape(hv, -1), 0, hk, per, 1).reshape(w.shape)
        elif name.endswith(".ssm_conv1d.weight"):
            w = np.concatenate([w[:2 * hk * dk],
                                _reorder_v_heads(w[2 * hk * dk:], 0, hk, per, dv)])
        elif name.endswith(".ssm_out.weight"):
            w = _reorder_v_heads(w, 1, hk, per, dv)
    if name.endswith(".ssm_a"):
        w = -np.exp(w)  # A_log as -exp(A_log)
    return w


# conversion/qwen.py Qwen3NextModel.modify_tensors
QWEN35_RENAMES = {"linear_attn.dt_bias": (gguf.MODEL_TENSOR.SSM_DT, "bias")}

# conversion/gemma.py Gemma4Model.modify_tensors
GEMMA4_RENAMES = {"router.scale": (gguf.MODEL_TENSOR.FFN_GATE_INP, "scale"),
                  "router.per_expert_scale": (gguf.MODEL_TENSOR.FFN_DOWN_EXP, "scale")}
# Gemma 4's two RoPEs: a full layer's "proportional" one on a quarter of its head (rope_freqs
# marks the rest 1e30, as conversion/gemma.py does), a sliding layer's plain one
GEMMA4_ROPE = {
    "full_attention": {"rope_type": "proportional", "rope_theta": 1e6,
                       "partial_rotary_factor": 0.25},
    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4,
                          "partial_rotary_factor": 1.0}}
GEMMA4_ROPE_FREQS = np.array([1.0] * 4 + [1e30] * 12, dtype=np.float32)

# Llama 3.x's RoPE scaling, its wavelength bands set so the tests' 16-wide heads see all
# three (kept, smoothed, scaled by `factor`)
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 64}


def llama3_rope_factors(head_dim: int, theta: float, s: dict[str, Any]) -> np.ndarray:
    """conversion/llama.py LlamaModel.generate_extra_tensors: Llama 3.x's rope_freqs tensor
    (each frequency's divisor) from its rope_scaling."""
    old = s["original_max_position_embeddings"]
    low, high = s.get("low_freq_factor", 1.0), s.get("high_freq_factor", 4.0)
    out = []
    for freq in 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim):
        wavelen = 2 * np.pi / freq
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(s["factor"])
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / s["factor"] + smooth))
    return np.array(out, dtype=np.float32)


CASES: dict[str, ArchCase] = {
    "llama": ArchCase("llama", _cfg("llama"), permute_qk=True, metadata=_llama_meta),
    # Llama 3.x: its RoPE scaling written as the rope_freqs tensor (mlx-lm's Llama3RoPE)
    "llama3": ArchCase("llama", _cfg("llama", rope_scaling=LLAMA3_SCALING), permute_qk=True,
                       metadata=_llama_meta,
                       extra={"rope_freqs.weight": llama3_rope_factors(16, 10000.0,
                                                                       LLAMA3_SCALING)}),
    "qwen2": ArchCase("qwen2", _cfg("qwen2")),
    # Qwen2-VL / Qwen2.5-VL's language model: M-RoPE sections (head_dim 16: 8 frequencies)
    "qwen2vl": ArchCase("qwen2vl", _cfg("qwen2", rope_scaling=MROPE), metadata=qwen2vl_meta),
    "qwen3": ArchCase("qwen3", _cfg("qwen3", head_dim=32), metadata=_key_length),
    # LFM2: a short-convolution layer, an attention layer (q / k norms), a convolution layer
    "lfm2": ArchCase("lfm2", _cfg(
        "lfm2", num_hidden_layers=3, norm_eps=1e-6, conv_bias=False, conv_L_cache=3,
        block_dim=64, block_ff_dim=96, block_multiple_of=256, block_ffn_dim_multiplier=1.0,
        block_auto_adjust_ff_dim=False, layer_types=["conv", "full_attention", "conv"],
        full_attn_idxs=[1]), metadata=lfm2_meta, transform=lfm2_tensor),
    # Qwen3-VL's language model: Qwen3 with M-RoPE sections and two DeepStack levels
    "qwen3vl": ArchCase("qwen3vl", _cfg("qwen3", head_dim=16, rope_scaling=MROPE,
                                        num_deepstack_layers=2), metadata=qwen3vl_meta),
    "qwen3moe": ArchCase("qwen3moe", _cfg(
        "qwen3_moe", head_dim=16, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, decoder_sparse_step=1, mlp_only_layers=[],
        norm_topk_prob=True), metadata=_moe_meta),
    "gemma2": ArchCase("gemma2", _cfg(
        "gemma2", head_dim=16, query_pre_attn_scalar=16, sliding_window=4096,
        attn_logit_softcapping=50.0, final_logit_softcapping=30.0), norm_shift=1.0,
        metadata=_gemma2_meta),
    "gemma3": ArchCase("gemma3", _cfg(
        "gemma3_text", num_hidden_layers=6, head_dim=16, query_pre_attn_scalar=16,
        sliding_window=8, sliding_window_pattern=6, rope_theta=1e6,
        rope_local_base_freq=10000.0, rope_scaling={"rope_type": "linear", "factor": 8.0}),
        norm_shift=1.0, metadata=_gemma3_meta),
    # Gemma 4 (E2B-like): per-layer inputs, KV shared by the last three layers (the last
    # layer keeping its own is a full one, as llama.cpp's reuse rule expects), a full layer's
    # heads twice as wide with "proportional" RoPE on a quarter of them (rope_freqs marks
    # the rest 1e30, as conversion/gemma.py does)
    "gemma4": ArchCase("gemma4", _cfg(
        "gemma4_text", num_hidden_layers=6, head_dim=16, global_head_dim=32,
        num_key_value_heads=1, num_global_key_value_heads=1, num_kv_shared_layers=3,
        hidden_size_per_layer_input=8, vocab_size_per_layer_input=VOCAB, sliding_window=8,
        final_logit_softcapping=30.0, use_double_wide_mlp=True, tie_word_embeddings=True,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
        rope_parameters=GEMMA4_ROPE), metadata=_gemma4_meta,
        extra={"rope_freqs.weight": GEMMA4_ROPE_FREQS}, renames=GEMMA4_RENAMES),
    # Gemma 4 26B-A4B-like: every layer's MLP beside 4 experts (2 a token), a full layer's
    # V the same as its K, fewer KV heads in full layers than in sliding ones, no per-layer
    # inputs and no KV sharing
    "gemma4-moe": ArchCase("gemma4", _cfg(
        "gemma4_text", num_hidden_layers=4, head_dim=16, global_head_dim=32,
        num_key_value_heads=2, num_global_key_value_heads=1, attention_k_eq_v=True,
        num_kv_shared_layers=0, hidden_size_per_layer_input=0, sliding_window=8,
        final_logit_softcapping=30.0, use_double_wide_mlp=False, tie_word_embeddings=True,
        enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=32,
        layer_types=["sliding_attention", "full_attention"] * 2,
        rope_parameters=GEMMA4_ROPE), metadata=_gemma4_meta,
        extra={"rope_freqs.weight": GEMMA4_ROPE_FREQS}, renames=GEMMA4_RENAMES),
    "phi3": ArchCase("phi3", _cfg("phi3")),
    # Phi-3.5's LongRoPE: the factors are tensors, the original context a key
    "phi3-longrope": ArchCase("phi3", _cfg(
        "phi3", max_position_embeddings=131072, original_max_position_embeddings=4096,
        rope_scaling={"type": "longrope", "long_factor": [1.0 + i / 4 for i in range(8)],
                      "short_factor": [1.0 + i / 16 for i in range(8)]}),
        metadata=_longrope_meta,
        extra={"rope_factors_long.weight": np.array([1.0 + i / 4 for i in range(8)],
                                                    dtype=np.float32),
               "rope_factors_short.weight": np.array([1.0 + i / 16 for i in range(8)],
                                                     dtype=np.float32)}),
    "granite": ArchCase("granite", _cfg(
        "granite", logits_scaling=2.0, attention_multiplier=0.2, embedding_multiplier=3.0,
        residual_multiplier=0.5, attention_bias=False, mlp_bias=False),
        permute_qk=True, metadata=_granite_meta),
    "olmo2": ArchCase("olmo2", _cfg("olmo2")),
    "smollm3": ArchCase("smollm3", _cfg("smollm3", num_hidden_layers=4,
                                        no_rope_layer_interval=4),
                        permute_qk=True, metadata=_llama_meta),
    # Ministral 3: YaRN (16 positions before it scales, so the test's prompts see it) and
    # Llama 4's attention temperature
    "mistral3": ArchCase("mistral3", _cfg(
        "ministral3", head_dim=16, rope_theta=1e6,
        rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0,
                         "original_max_position_embeddings": 16, "beta_fast": 32.0,
                         "beta_slow": 1.0, "mscale_all_dim": 1.0,
                         "llama_4_scaling_beta": 0.1}),
        permute_qk=True, metadata=_ministral3_meta),
    # Mistral Small 3.1's text model (a Mistral 3 VLM's): no YaRN, written as mistral3
    "mistral3-vl": ArchCase("mistral3", _cfg("mistral", head_dim=16), permute_qk=True,
                            metadata=_llama_meta),
    # Qwen 3.5 (dense): Gated DeltaNet layers with full attention every 2nd layer, twice
    # as many value heads as key heads (the converter reorders them), a gated query and
    # RoPE on a quarter of each head
    "qwen35": ArchCase("qwen35", _cfg(
        "qwen3_5", num_hidden_layers=4, head_dim=32, full_attention_interval=2,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
        linear_value_head_dim=32, linear_conv_kernel_dim=4,
        rope_parameters={"type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1]}),
        metadata=_qwen35_meta, renames=QWEN35_RENAMES, transform=_qwen35_tensor),
    # Qwen 3.5 MoE (35B-A3B-like): the same layers, each MLP 4 experts (2 a token) beside
    # a shared expert under its sigmoid gate, wider than one expert
    "qwen35moe": ArchCase("qwen35moe", _cfg(
        "qwen3_5_moe", num_hidden_layers=4, head_dim=32, full_attention_interval=2,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
        linear_value_head_dim=32, linear_conv_kernel_dim=4, num_experts=4,
        num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64,
        decoder_sparse_step=1, norm_topk_prob=True,
        rope_parameters={"type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1]}),
        metadata=_qwen35_meta, renames=QWEN35_RENAMES, transform=_qwen35_tensor),
    "gpt-oss": ArchCase("gpt-oss", _cfg(
        "gpt_oss", head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
        rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                      "original_max_position_embeddings": 4096}), metadata=_gpt_oss_meta),
}


def build_model(case: ArchCase, seed: int = 0) -> nn.Module:
    """mlx-lm's model of the case's config, random float32 weights (norms near one, so the
    tests see them; biases and sinks nonzero)."""
    from mlx_lm.utils import _get_classes

    model_cls, args_cls = _get_classes(case.config)
    model = model_cls(args_cls.from_dict(case.config))
    mx.random.seed(seed)
    params = []
    for name, value in tree_flatten(model.parameters()):
        # norms, and Gemma 4's per-layer output scale, positive near one as trained ones
        # are (a random sign or a near-zero scale makes a tiny model chaotic, and two
        # implementations' rounding then differs by more than the test can tell from a bug)
        if value.ndim == 1 and ("norm" in name or name.endswith("layer_scalar")):
            v = 0.5 + mx.random.uniform(shape=value.shape)
        else:
            v = 0.3 * mx.random.normal(value.shape)
        params.append((name, v.astype(mx.float32)))
    model.update(tree_unflatten(params))
    mx.eval(model.parameters())
    return model


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """conversion/llama.py LlamaModel.permute (split halves → adjacent pairs)."""
    return (w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def hf_parameters(model: nn.Module) -> dict[str, np.ndarray]:
    """The model's parameters under Hugging Face's names and shapes where mlx-lm's sanitize
    changed them: Gemma 4's experts as one gate_up_proj (gate rows first) and a down_proj;
    Qwen 3.5's text model out of mlx-lm's language_model wrapper, its conv1d kernels as
    (channels, 1, width) and its zero-centred RMSNorms less the one mlx-lm's sanitize
    added (qwen3_5.py: input/post-attention, final, q and k norms)."""
    params = {name: np.array(value) for name, value in tree_flatten(model.parameters())}
    qwen35 = getattr(model, "model_type", "").startswith("qwen3_5")
    out = {}
    for name, w in params.items():
        if name.endswith(".conv.conv.weight"):  # LFM2: Hugging Face's (channels, 1, width)
            w = np.moveaxis(w, 2, 1)
        head, sep, leaf = name.partition(".experts.switch_glu.")
        if qwen35:
            name = name.removeprefix("language_model.")
            if name.endswith("conv1d.weight"):
                w = np.moveaxis(w, 2, 1)
            elif name.endswith(("layernorm.weight", "model.norm.weight", "q_norm.weight",
                                "k_norm.weight")):
                w = w - np.float32(1.0)  # exact: w in [0.5, 2) (Sterbenz)
        if not sep:
            out[name] = w
        elif leaf == "gate_proj.weight":
            up = params[f"{head}.experts.switch_glu.up_proj.weight"]
            out[f"{head}.experts.gate_up_proj"] = np.concatenate([w, up], axis=-2)
        elif leaf == "down_proj.weight":
            out[f"{head}.experts.down_proj"] = w
    return out


def gguf_tensors(case: ArchCase, model: nn.Module) -> dict[str, np.ndarray]:
    """The model's weights under their GGUF names, as the converter leaves them."""
    arch_id = next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == case.gguf_arch)
    name_map = gguf.get_tensor_name_map(arch_id, case.config["num_hidden_layers"])
    c = case.config
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    out = {}
    for name, w in hf_parameters(model).items():
        hf = name.replace(".switch_mlp.", ".experts.")
        renamed = next((r for end, r in case.renames.items() if hf.endswith(end)), None)
        if renamed is not None:
            kind, suffix = renamed
            bid = int(hf.split(".layers.")[1].split(".")[0])
            new = f"{gguf.TENSOR_NAMES[kind].format(bid=bid)}.{suffix}"
            out[new] = case.transform(new, w, c) if case.transform is not None else w
            continue
        base, _, suffix = hf.rpartition(".")
        new = name_map.get_name(base)
        new = f"{new}.{suffix}" if new is not None else name_map.get_name(hf)
        assert new is not None, f"gguf-py has no name for {name}"
        # conversion/gemma.py filter_tensors: layer_scalar and the stacked experts get .weight;
        # conversion/gpt_oss.py filter_tensors: the sinks too (llama.cpp wants that name)
        if name.endswith((".layer_scalar", ".experts.down_proj", ".self_attn.sinks")) \
                or ".experts.gate_up_proj" in name:
            new += ".weight"
        if case.permute_qk and new.split(".")[-2] in ("attn_q", "attn_k"):
            w = _permute(w, w.shape[0] // head_dim)
        if case.norm_shift and new.endswith("norm.weight"):
            w = w + np.float32(case.norm_shift)
        if case.transform is not None:
            w = case.transform(new, w, c)
        out[new] = w
    return out | case.extra


def write_gguf(path: Path, case: ArchCase, tensors: dict[str, np.ndarray], *,
               raw_types: dict[str, GGMLQuantizationType] | None = None,
               file_type: int = 0, name: str | None = None,
               vocabulary: Callable[[GGUFWriter], None] | None = None) -> Path:
    """A GGUF of these tensors with the case's metadata and the tiny BPE vocabulary
    (or what `vocabulary` writes instead: a VLM's own, tests/mmproj_models.py).
    ``raw_types``: tensors given as raw blocks (uint8 rows) of that GGML type."""
    c = case.config
    w = GGUFWriter(str(path), case.gguf_arch)
    w.add_name(name or "tiny " + case.gguf_arch)
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    if case.gguf_arch != "gemma2":  # conversion/gemma.py: Gemma 2 writes no RoPE base
        w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_file_type(file_type)
    if case.metadata is not None:
        case.metadata(w, c)
    if vocabulary is not None:
        vocabulary(w)
    else:
        _tiny_vocabulary(w)
    for tensor, value in tensors.items():
        kind = (raw_types or {}).get(tensor)
        if kind is None:
            w.add_tensor(tensor, np.ascontiguousarray(value, dtype=np.float32))
        else:
            w.add_tensor(tensor, value, raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _tiny_vocabulary(w: GGUFWriter) -> None:
    tokens, types = vocab()
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)


# Where each type's fp16 scales sit in its block (bytes), from ggml-common.h's structs.
FP16_SCALES = {GGMLQuantizationType.Q4_0: [0], GGMLQuantizationType.Q4_1: [0, 2],
               GGMLQuantizationType.Q5_0: [0], GGMLQuantizationType.Q5_1: [0, 2],
               GGMLQuantizationType.Q8_0: [0], GGMLQuantizationType.Q2_K: [80, 82],
               GGMLQuantizationType.Q3_K: [108], GGMLQuantizationType.Q4_K: [0, 2],
               GGMLQuantizationType.Q5_K: [0, 2], GGMLQuantizationType.Q6_K: [208],
               GGMLQuantizationType.IQ4_NL: [0], GGMLQuantizationType.IQ4_XS: [0]}


def random_blocks(kind: GGMLQuantizationType, shape: tuple[int, ...], seed: int,
                  scale: float = 0.02) -> np.ndarray:
    """Random blocks of `kind` for a weight of `shape` (numpy order, the last dimension a
    multiple of the block): (..., bytes a row) uint8, fp16 scales around `scale`."""
    block, size = GGML_QUANT_SIZES[kind]
    rng = np.random.default_rng(seed)
    n_blocks = int(np.prod(shape)) // block
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in FP16_SCALES.get(kind, []):
        v = (scale * (0.5 + rng.random(n_blocks))).astype(np.float16)
        if kind in (GGMLQuantizationType.Q2_K, GGMLQuantizationType.Q3_K):
            v = (v / 8).astype(np.float16)  # their sub-scales multiply up to 15 and 32
        raw[:, off:off + 2] = v.reshape(-1, 1).view(np.uint8)
    if kind == GGMLQuantizationType.MXFP4:
        raw[:, 0] = rng.integers(118, 122, n_blocks)  # 2^(e-128): scales 2^-10 ... 2^-6
    return raw.reshape(*shape[:-1], shape[-1] // block * size)


def quantize(tensors: dict[str, np.ndarray], kind: GGMLQuantizationType, seed: int = 0,
             which: Callable[[str], GGMLQuantizationType | None] | None = None
             ) -> tuple[dict[str, np.ndarray], dict[str, GGMLQuantizationType]]:
    """The 2-D and 3-D weights replaced by random blocks of `kind` (or `which(name)`'s
    type; None keeps a tensor float), as llama-quantize leaves norms and biases float."""
    out, raw_types = dict(tensors), {}
    for i, (name, w) in enumerate(tensors.items()):
        if w.ndim < 2 or not name.endswith(".weight"):
            continue
        k = which(name) if which is not None else kind
        if k is None or w.shape[-1] % GGML_QUANT_SIZES[k][0]:
            continue
        out[name] = random_blocks(k, w.shape, seed + i)
        raw_types[name] = k
    return out, raw_types
