"""A GGUF architecture as an mlx-lm model: its config and where each tensor goes.

What comes from libraries:
- the metadata keys → config keys: transformers' GGUF integration (``GGUF_CONFIG_MAPPING``),
  per architecture where it has one, else its llama table (the keys are llama.cpp's, shared
  by every architecture);
- the tensor names: gguf-py's ``TensorNameMap`` (llama.cpp's own map from Hugging Face
  names to GGUF ones), asked for every parameter of the mlx-lm model, whose names are the
  Hugging Face ones;
- the model: mlx-lm's own module for the architecture.

What no library says is in ``ARCHS`` below, one line an architecture, each fact with where
llama.cpp does it: what its converter did to the tensors (q/k rows permuted for llama.cpp's
adjacent-pair RoPE; Gemma's norm weights stored plus one) and what its loader assumes that
the file leaves out (Gemma 3's sliding-window pattern of 6, SmolLM3's RoPE-free layer every
4th, ...).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gguf
import numpy as np

from .errors import ModelLoadError
from .gguf_file import GgufFile, GgufTensor

ConfigHook = Callable[[GgufFile, dict[str, Any]], None]


@dataclass(frozen=True)
class Arch:
    model_type: str  # mlx-lm's model_type (its models/ module, through MODEL_REMAPPING)
    # llama.cpp runs this architecture with LLAMA_ROPE_TYPE_NORM (src/llama-model.cpp,
    # llama_model_rope_type): its converter permuted the q/k rows into adjacent pairs.
    interleaved_rope: bool = False
    # convert_hf_to_gguf stored every RMSNorm weight plus this (conversion/gemma.py: "+ 1");
    # mlx-lm's module adds it again.
    norm_offset: float = 0.0
    transformers_name: str | None = None  # its GGUF_CONFIG_MAPPING key, if not model_type
    hook: ConfigHook | None = None
    defaults: dict[str, Any] = field(default_factory=dict)  # llama.cpp's fixed choices
    # mlx-lm parameters (named after "model.layers.{bid}.") that gguf-py's map has no
    # Hugging Face name for: the GGUF tensor (gguf-py's) and suffix the converter gives them
    tensors: dict[str, tuple[gguf.MODEL_TENSOR, str]] = field(default_factory=dict)
    # Gated DeltaNet layers as conversion/qwen.py writes them (gguf_linear_attn.py undoes it)
    linear_attention: bool = False
    # LFM2's short-convolution kernels squeezed to 2-D (gguf_shortconv.py undoes it)
    short_convolutions: bool = False


def _gemma2(f: GgufFile, c: dict[str, Any]) -> None:
    c["attn_logit_softcapping"] = float(f.arch_value("attn_logit_softcapping", 50.0))
    c["final_logit_softcapping"] = float(f.arch_value("final_logit_softcapping", 30.0))
    c.setdefault("sliding_window", 4096)  # src/models/gemma2.cpp: n_swa = 4096
    c["query_pre_attn_scalar"] = _gemma_attention_scalar(c, {46: True})


def _gemma3(f: GgufFile, c: dict[str, Any]) -> None:
    if f.arch_value("final_logit_softcapping") is not None:
        c["final_logit_softcapping"] = float(f.arch_value("final_logit_softcapping"))
    if not f.arch_value("attention.sliding_window"):
        c["sliding_window_pattern"] = 1  # no sliding layers (src/models/gemma3.cpp)
    local = f.arch_value("rope.freq_base_swa")
    if local is not None:
        c["rope_local_base_freq"] = float(local)
    c["query_pre_attn_scalar"] = _gemma_attention_scalar(c, {62: True})


def _gemma_attention_scalar(c: dict[str, Any], big: dict[int, bool]) -> float:
    """src/models/gemma{2,3}.cpp: the 27B model scales queries by hidden/heads, the others
    by the head size."""
    if big.get(c["num_hidden_layers"]):
        return c["hidden_size"] / c["num_attention_heads"]
    return float(c["head_dim"])


def _moe(f: GgufFile, c: dict[str, Any]) -> None:
    ff = f.arch_value("expert_feed_forward_length")
    if ff is not None:
        c["moe_intermediate_size"] = int(ff)
    c.setdefault("decoder_sparse_step", 1)
    c.setdefault("mlp_only_layers", [])


def _granite(f: GgufFile, c: dict[str, Any]) -> None:
    # src/models/granite.cpp reads these four; the converter wrote them from the HF config.
    c["logits_scaling"] = float(f.arch_value("logit_scale", 1.0))
    c["attention_multiplier"] = float(
        f.arch_value("attention.scale", c["head_dim"] ** -0.5))
    c["embedding_multiplier"] = float(f.arch_value("embedding_scale", 1.0))
    c["residual_multiplier"] = float(f.arch_value("residual_scale", 1.0))


def _gpt_oss(f: GgufFile, c: dict[str, Any]) -> None:
    c["intermediate_size"] = int(f.arch_value("expert_feed_forward_length",
                                              c.get("intermediate_size", 0)))
    window = f.arch_value("attention.sliding_window")
    if window is not None:
        c["sliding_window"] = int(window)
    # src/models/openai-moe.cpp: load_swa_pattern(ml, 2), sliding first
    c["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention"
                        for i in range(c["num_hidden_layers"])]


def _qwen2vl(f: GgufFile, c: dict[str, Any]) -> None:
    """Qwen2-VL / Qwen2.5-VL's language model (conversion/qwenvl.py Qwen2VLModel): Qwen2
    with M-RoPE, its (t, h, w) frequency sections as rope.dimension_sections (padded to 4);
    Qwen3-VL's (conversion/qwen3vl.py Qwen3VLTextModel) is Qwen3 with them the same way.
    mlx-lm's qwen2 / qwen3 take them as a plain RoPE (text alone: the three positions are
    one); a pair with its mmproj runs the engine's M-RoPE on them (and Qwen3-VL's DeepStack,
    as many levels as its mmproj has: engine/vision/mmproj_qwen.py)."""
    sections = f.arch_value("rope.dimension_sections")
    if sections is None:
        raise ModelLoadError(f"{f.path}: a qwen2vl GGUF without rope.dimension_sections")
    c["rope_scaling"] = {"type": "mrope", "mrope_section": [int(s) for s in sections[:3]]}


def _phi3(f: GgufFile, c: dict[str, Any]) -> None:
    window = f.arch_value("attention.sliding_window")
    if window:
        c["sliding_window"] = int(window)
    dims = f.arch_value("rope.dimension_count")
    if dims and int(dims) != c["head_dim"]:  # Phi-4-mini rotates 3/4 of each head
        c["partial_rotary_factor"] = int(dims) / c["head_dim"]
    long = f.tensors.get("rope_factors_long.weight")
    if long is not None:  # Phi-3.5 / Phi-4-mini's LongRoPE (src/models/phi3.cpp)
        short = f.tensors.get("rope_factors_short.weight", long)
        c["rope_scaling"] = {"type": "longrope",
                             "long_factor": np.asarray(long.data, np.float32).tolist(),
                             "short_factor": np.asarray(short.data, np.float32).tolist()}
        original = f.arch_value("rope.scaling.original_context_length")
        if original:
            c["original_max_position_embeddings"] = int(original)
        # ggml's rope scales the rotated features by rope_attn_factor with either factor
        # set, 1.0 where the file has none (src/llama-model.cpp); the converter writes
        # sqrt(1 + ln(ratio) / ln(original)) (conversion/phi.py). engine/longrope.py
        # reads it under transformers' name; mlx-lm's own module computes the default.
        attn = f.arch_value("rope.scaling.attn_factor")
        c["rope_scaling"]["attention_factor"] = float(attn) if attn is not None else 1.0


def _ministral3(f: GgufFile, c: dict[str, Any]) -> None:
    """Ministral 3 (src/models/mistral3.cpp): YaRN with the all-dimension mscale as
    `yarn_log_multiplier`, and Llama 4's attention temperature as `temperature_scale`;
    mlx-lm's module reads them all from one `rope_parameters`."""
    params = dict(c.pop("rope_scaling", None) or {"rope_type": "default"})
    params["rope_theta"] = c.pop("rope_theta", 1_000_000.0)
    params.setdefault("original_max_position_embeddings", c["max_position_embeddings"])
    params["mscale_all_dim"] = float(f.arch_value("rope.scaling.yarn_log_multiplier", 0.0))
    params["llama_4_scaling_beta"] = float(f.arch_value("attention.temperature_scale", 0.0))
    c["rope_parameters"] = params


def _gemma4(f: GgufFile, c: dict[str, Any]) -> None:
    """Gemma 4 (conversion/gemma.py Gemma4Model): per-layer arrays for the sliding pattern,
    the KV heads and the MLP width; two head sizes; two RoPEs, the full layers' one
    "proportional", its unrotated dimensions marked 1e30 in rope_freqs; the 26B-A4B's
    experts beside every layer's MLP (src/models/gemma4.cpp)."""
    n = c["num_hidden_layers"]
    pattern = f.arch_value("attention.sliding_window_pattern")
    swa = [bool(x) for x in pattern] if pattern is not None else [True] * n
    c["layer_types"] = ["sliding_attention" if s else "full_attention" for s in swa]
    c["head_dim"] = int(f.arch_value("attention.key_length_swa", c["global_head_dim"]))
    kv = f.arch_value("attention.head_count_kv")
    if kv is not None and np.ndim(kv):
        kv = [int(x) for x in kv]
        c["num_key_value_heads"] = next((k for k, s in zip(kv, swa, strict=True) if s), kv[0])
        c["num_global_key_value_heads"] = next(
            (k for k, s in zip(kv, swa, strict=True) if not s), kv[0])
    # use_double_wide_mlp: the KV-shared layers' MLP is twice as wide (the tensors say so)
    first, last = (f.tensors.get(f"blk.{i}.ffn_up.weight") for i in (0, n - 1))
    c["intermediate_size"] = first.shape[0] if first is not None else c["intermediate_size"]
    c["use_double_wide_mlp"] = (first is not None and last is not None
                                and last.shape[0] == 2 * first.shape[0])
    c["num_kv_shared_layers"] = int(f.arch_value("attention.shared_kv_layers", 0))
    per_layer = int(f.arch_value("embedding_length_per_layer_input", 0) or 0)
    c["hidden_size_per_layer_input"] = per_layer
    if per_layer:
        c["vocab_size_per_layer_input"] = f.tensors["per_layer_token_embd.weight"].shape[0]
    cap = f.arch_value("final_logit_softcapping")
    c["final_logit_softcapping"] = float(cap) if cap else None
    experts = f.arch_value("expert_count")
    if experts:  # mlx-lm's names for them (transformers' GGUF map has none for gemma4)
        c["enable_moe_block"] = True
        c["num_experts"] = int(experts)
        c["top_k_experts"] = int(f.arch_value("expert_used_count", 1))
        down = f.tensors.get("blk.0.ffn_down_exps.weight")
        c["moe_intermediate_size"] = int(f.arch_value(
            "expert_feed_forward_length", down.shape[-1] if down is not None else 0))
    # attention_k_eq_v: a full layer that computes its KV has no V projection
    first_full = next((i for i, s in enumerate(swa) if not s), None)
    c["attention_k_eq_v"] = (first_full is not None
                             and f"blk.{first_full}.attn_k.weight" in f.tensors
                             and f"blk.{first_full}.attn_v.weight" not in f.tensors)
    freqs = f.tensors.get("rope_freqs.weight")
    rotated = (int(np.sum(np.asarray(freqs.data) == 1.0)) if freqs is not None
               else c["global_head_dim"] // 8)
    swa_dims = int(f.arch_value("rope.dimension_count_swa", c["head_dim"]))
    c.pop("rope_scaling", None)  # rope_freqs is this RoPE's, not Llama 3's factors
    c["rope_parameters"] = {
        "full_attention": {"rope_type": "proportional", "rope_theta": float(
            f.arch_value("rope.freq_base", 1_000_000.0)),
            "partial_rotary_factor": 2 * rotated / c["global_head_dim"]},
        "sliding_attention": {"rope_type": "default", "rope_theta": float(
            f.arch_value("rope.freq_base_swa", 10_000.0)),
            "partial_rotary_factor": swa_dims / c["head_dim"]},
    }


def _lfm2(f: GgufFile, c: dict[str, Any]) -> None:
    """LFM2 (conversion/lfm2.py LFM2Model, read back as src/models/lfm2.cpp reads it): a
    layer is attention where its head_count_kv is not 0, a short convolution elsewhere;
    feed_forward_length is the width after the converter's own auto-adjustment; the
    convolutions' projections have biases where the file holds them."""
    kv = f.arch_value("attention.head_count_kv")
    heads = [int(x) for x in np.asarray(kv).reshape(-1)] if kv is not None else []
    if len(heads) != c["num_hidden_layers"]:
        raise ModelLoadError(f"{f.path}: an lfm2 GGUF needs attention.head_count_kv for "
                             "each layer (0 for a convolution layer)")
    c["layer_types"] = ["full_attention" if h else "conv" for h in heads]
    c["full_attn_idxs"] = [i for i, h in enumerate(heads) if h]
    c["num_key_value_heads"] = max(heads)
    c.update(norm_eps=c["rms_norm_eps"], block_dim=c["hidden_size"],
             block_ff_dim=c["intermediate_size"], block_auto_adjust_ff_dim=False,
             block_multiple_of=256, block_ffn_dim_multiplier=1.0,
             conv_bias=any(n.endswith(".shortconv.in_proj.bias") for n in f.tensors))


def _qwen35(f: GgufFile, c: dict[str, Any]) -> None:
    """Qwen 3.5 (conversion/qwen.py Qwen3NextModel.set_gguf_parameters, read back as
    src/models/qwen35.cpp reads it): the Gated DeltaNet sizes as ssm.* keys, a full
    attention layer every ``full_attention_interval``-th, the MTP blocks counted in
    block_count, RoPE on ``rope.dimension_count`` dimensions of a head. Its multimodal
    RoPE sections rotate a text position as plain RoPE does (every section the same
    position), which is what mlx-lm's text model runs. transformers' GGUF integration has
    no table for it, so the ssm.* keys are gguf-py's names (Keys.SSM)."""
    c["num_hidden_layers"] -= int(f.arch_value("nextn_predict_layers", 0) or 0)
    for key, name in (("ssm.conv_kernel", "linear_conv_kernel_dim"),
                      ("ssm.state_size", "linear_key_head_dim"),
                      ("ssm.group_count", "linear_num_key_heads"),
                      ("ssm.time_step_rank", "linear_num_value_heads"),
                      ("ssm.inner_size", "linear_value_head_dim")):
        value = f.arch_value(key)
        if value is None:
            raise ModelLoadError(f"{f.path}: GGUF metadata lacks {f.architecture}.{key}")
        c[name] = int(value)
    c["linear_value_head_dim"] //= c["linear_num_value_heads"]  # inner = heads x head size
    # llama.cpp reads the layers' kinds from attention.recurrent_layers where the file has
    # it (the converter writes it from layer_types), else from full_attention_interval
    interval = int(f.arch_value("full_attention_interval", 4) or 4)
    recurrent = f.arch_value("attention.recurrent_layers")
    n = c["num_hidden_layers"]
    if recurrent is not None:
        kinds = [bool(x) for x in np.asarray(recurrent).reshape(-1)[:n]]
        interval = next((i + 1 for i, r in enumerate(kinds) if not r), n + 1)
        if kinds != [(i + 1) % interval != 0 for i in range(n)]:
            raise ModelLoadError(f"{f.path}: its full attention layers are not every "
                                 f"{interval}th, the only pattern mlx-lm's qwen3_5 builds")
    c["full_attention_interval"] = interval
    rope = dict(c.pop("rope_scaling", None) or {"rope_type": "default"})
    rope["type"] = rope.pop("rope_type")
    rope["rope_theta"] = float(c.get("rope_theta", 10_000_000.0))
    rope["partial_rotary_factor"] = int(f.arch_value(
        "rope.dimension_count", c["head_dim"] // 4)) / c["head_dim"]
    sections = f.arch_value("rope.dimension_sections")
    if sections is not None:
        rope["mrope_section"] = [int(s) for s in np.asarray(sections).reshape(-1)[:3]]
    c["rope_parameters"] = rope
    if f.arch_value("expert_count"):
        _moe(f, c)
        shared = f.arch_value("expert_shared_feed_forward_length")
        if shared is not None:
            c["shared_expert_intermediate_size"] = int(shared)


_T = gguf.MODEL_TENSOR
# conversion/qwen.py Qwen3NextModel.modify_tensors renames dt_bias to dt_proj.bias
_QWEN35_TENSORS = {"linear_attn.dt_bias": (_T.SSM_DT, "bias")}
# conversion/gemma.py Gemma4Model.modify_tensors renames the router's input scale and its
# per-expert scale (llama.cpp applies the latter to each expert's output, as ffn_down_exps_s);
# Hugging Face's fused experts.gate_up_proj (which mlx-lm's sanitize halves) is read as
# llama.cpp's separate gate and up experts (split_gate_up_experts).
_GEMMA4_EXPERT_TENSORS = {
    "router.scale": (_T.FFN_GATE_INP, "scale"),
    "router.per_expert_scale": (_T.FFN_DOWN_EXP, "scale"),
    "experts.switch_glu.gate_proj.weight": (_T.FFN_GATE_EXP, "weight"),
    "experts.switch_glu.up_proj.weight": (_T.FFN_UP_EXP, "weight"),
}

ARCHS: dict[str, Arch] = {
    "llama": Arch("llama", interleaved_rope=True),
    "qwen2": Arch("qwen2"),
    "qwen2vl": Arch("qwen2", hook=_qwen2vl),
    "qwen3": Arch("qwen3"),
    "qwen3vl": Arch("qwen3", hook=_qwen2vl),
    "qwen3moe": Arch("qwen3_moe", hook=_moe, defaults={"norm_topk_prob": True}),
    "gemma2": Arch("gemma2", norm_offset=1.0, hook=_gemma2),
    "gemma3": Arch("gemma3_text", norm_offset=1.0, transformers_name="gemma3", hook=_gemma3),
    # conversion/gemma.py Gemma4Model.norm_shift: 0 (its norms are stored as trained)
    "gemma4": Arch("gemma4_text", transformers_name="gemma4", hook=_gemma4,
                   tensors=_GEMMA4_EXPERT_TENSORS),
    "phi3": Arch("phi3", hook=_phi3),
    "granite": Arch("granite", interleaved_rope=True, hook=_granite,
                    defaults={"attention_bias": False, "mlp_bias": False}),
    "olmo2": Arch("olmo2"),
    # src/models/smollm3.cpp: n_no_rope_layer_step = 4
    "smollm3": Arch("smollm3", interleaved_rope=True,
                    defaults={"no_rope_layer_interval": 4}),
    # conversion/qwen.py Qwen3_5TextModel / Qwen3_5MoeTextModel; norms stored plus one as
    # mlx-lm's sanitize makes them, so taken as they are (no norm_offset)
    "qwen35": Arch("qwen3_5", transformers_name="qwen3", hook=_qwen35,
                   tensors=_QWEN35_TENSORS, linear_attention=True),
    "qwen35moe": Arch("qwen3_5_moe", transformers_name="qwen3_moe", hook=_qwen35,
                      tensors=_QWEN35_TENSORS, linear_attention=True,
                      defaults={"norm_topk_prob": True}),
    "gpt-oss": Arch("gpt_oss", transformers_name="gpt_oss", hook=_gpt_oss),
    # conversion/mistral3.py: a LlamaModel (q/k permuted); mlx-lm's module has no
    # rope_traditional, so the rows are put back
    "mistral3": Arch("ministral3", interleaved_rope=True, hook=_ministral3),
    # LFM2 (LFM2-VL's language model too): attention and short-convolution layers
    "lfm2": Arch("lfm2", hook=_lfm2, short_convolutions=True),
}


def architecture(f: GgufFile) -> Arch:
    arch = ARCHS.get(f.architecture)
    if arch is None:
        raise ModelLoadError(
            f"{f.path}: GGUF architecture {f.architecture!r} is not supported here "
            f"(supported: {', '.join(sorted(ARCHS))})")
    return arch


def _config_keys(arch: Arch) -> dict[str, str | None]:
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    keys = dict(GGUF_CONFIG_MAPPING.get(arch.transformers_name or arch.model_type)
                or GGUF_CONFIG_MAPPING["llama"])
    # llama.cpp's head size key, which transformers maps only for some architectures
    keys.setdefault("attention.key_length", "head_dim")
    return keys


def _rope_scaling(f: GgufFile) -> dict[str, Any] | None:
    kind = f.arch_value("rope.scaling.type")
    factor = float(f.arch_value("rope.scaling.factor", 1.0) or 1.0)
    original = f.arch_value("rope.scaling.original_context_length")
    if kind in (None, "none"):
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": factor}
    if kind == "yarn":
        s: dict[str, Any] = {"rope_type": "yarn", "factor": factor}
        if original is not None:
            s["original_max_position_embeddings"] = int(original)
        for gguf_key, key in (("rope.scaling.yarn_beta_fast", "beta_fast"),
                              ("rope.scaling.yarn_beta_slow", "beta_slow")):
            if f.arch_value(gguf_key) is not None:
                s[key] = float(f.arch_value(gguf_key))
        return s
    raise ModelLoadError(f"{f.path}: RoPE scaling {kind!r} is not supported")


def hf_config(f: GgufFile, arch: Arch) -> dict[str, Any]:
    """The Hugging Face-style config.json of the file's model, as mlx-lm reads it."""
    for key in ("embedding_length", "block_count", "attention.head_count"):
        if f.arch_value(key) is None:
            raise ModelLoadError(f"{f.path}: GGUF metadata lacks {f.architecture}.{key}")
    c: dict[str, Any] = {"model_type": arch.model_type}
    for key, name in _config_keys(arch).items():
        value = f.arch_value(key)
        if name is not None and value is not None:
            if np.ndim(value):  # a per-layer array (Gemma 4): the first layer's; hooks see all
                value = np.asarray(value).reshape(-1)[0]
            c[name] = value.item() if hasattr(value, "item") else value
    c.setdefault("num_key_value_heads", c["num_attention_heads"])
    c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
    c.setdefault("max_position_embeddings", 2048)
    c.setdefault("rms_norm_eps", 1e-5)
    if "vocab_size" not in c:
        tokens = f.metadata.get("tokenizer.ggml.tokens")
        c["vocab_size"] = len(tokens) if tokens else f.tensors["token_embd.weight"].shape[0]
    c["tie_word_embeddings"] = "output.weight" not in f.tensors
    c["attention_bias"] = "blk.0.attn_q.bias" in f.tensors
    c["mlp_bias"] = "blk.0.ffn_up.bias" in f.tensors
    if "rope_freqs.weight" in f.tensors:
        # Llama 3.1-style frequency factors: mlx-lm's llama3 RoPE, whose frequencies the
        # loader then replaces with the file's (gguf.py)
        c["rope_scaling"] = {"rope_type": "llama3", "factor": 1.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0,
                             "original_max_position_embeddings": c["max_position_embeddings"]}
    else:
        c["rope_scaling"] = _rope_scaling(f)
    for key, value in arch.defaults.items():
        c.setdefault(key, value)
    if arch.hook is not None:
        arch.hook(f, c)
    return c


def model_classes(config: dict[str, Any], source: str) -> tuple[type, type]:
    from mlx_lm.utils import _get_classes

    try:
        return _get_classes(config)
    except ValueError as e:
        raise ModelLoadError(f"{source}: mlx-lm cannot build {config['model_type']!r}: "
                             f"{e}") from e


def uses_traditional_rope(args_class: type) -> bool:
    """mlx-lm's module for this architecture can run llama.cpp's adjacent-pair RoPE."""
    return any(f.name == "rope_traditional" for f in dataclasses.fields(args_class))


def gguf_names(f: GgufFile, param_names: list[str],
               tensors: dict[str, tuple[gguf.MODEL_TENSOR, str]] | None = None
               ) -> dict[str, str]:
    """mlx-lm parameter name → GGUF tensor name, through gguf-py's map (``tensors``: an
    architecture's parameters that map has no name for, Arch.tensors)."""
    arch_id = next((k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == f.architecture), None)
    if arch_id is None:
        raise ModelLoadError(f"{f.path}: gguf-py does not know architecture "
                             f"{f.architecture!r}")
    blocks = int(f.arch_value("block_count", 0))
    name_map = gguf.get_tensor_name_map(arch_id, blocks)
    out = {}
    for full in param_names:
        # mlx-lm's multimodal wrappers (qwen3_5) keep the text model as language_model
        name = full.removeprefix("language_model.")
        layer = re.match(r"model\.layers\.(\d+)\.(.+)$", name)
        if layer and tensors and layer.group(2) in tensors:
            kind, suffix = tensors[layer.group(2)]
            out[full] = f"{gguf.TENSOR_NAMES[kind].format(bid=int(layer.group(1)))}.{suffix}"
            continue
        # mlx-lm keeps stacked experts as switch_mlp or experts.switch_glu (its sanitize
        # renames Hugging Face's experts)
        for candidate in (name, name.replace(".switch_mlp.", ".experts."),
                          name.replace(".experts.switch_glu.", ".experts.")):
            base, dot, suffix = candidate.rpartition(".")
            mapped = name_map.get_name(base) if dot else None
            if mapped is not None:
                out[full] = f"{mapped}.{suffix}"
                break
            mapped = name_map.get_name(candidate)
            if mapped is not None:
                # a parameter without a suffix (Gemma 4's layer_scalar), written as .weight
                weight = f"{mapped}.weight"
                out[full] = weight if weight in f.tensors and mapped not in f.tensors else mapped
                break
    return out


def split_gate_up_experts(f: GgufFile) -> GgufFile:
    """The file with each fused gate/up expert tensor (``ffn_gate_up_exps``: Gemma 4's
    converter writes them, and any MoE converted with --fuse-gate-up-exps) as the two that
    llama.cpp's loaders otherwise read (``ffn_gate_exps``, ``ffn_up_exps``): build_moe_ffn
    (src/llama-graph.cpp) takes the first half of its rows as the gate. The halves are views
    of the file's rows (a quantized block never spans two rows), so nothing is re-encoded."""
    fused = re.compile(re.escape(gguf.TENSOR_NAMES[_T.FFN_GATE_UP_EXP]).replace(
        re.escape("{bid}"), r"(\d+)") + r"\.weight$")
    if not any(fused.match(name) for name in f.tensors):
        return f
    tensors: dict[str, GgufTensor] = {}
    for name, t in f.tensors.items():
        m = fused.match(name)
        if m is None:
            tensors[name] = t
            continue
        half = t.shape[-2] // 2
        for kind, rows in ((_T.FFN_GATE_EXP, slice(0, half)),
                           (_T.FFN_UP_EXP, slice(half, 2 * half))):
            new = f"{gguf.TENSOR_NAMES[kind].format(bid=int(m.group(1)))}.weight"
            tensors[new] = GgufTensor(new, t.kind, (*t.shape[:-2], half, t.shape[-1]),
                                      t.data[..., rows, :])
    return dataclasses.replace(f, tensors=tensors)


def rope_row_order(rows: int, heads: int) -> np.ndarray:
    """The row order that undoes convert_hf_to_gguf's LlamaModel.permute of a q or k
    projection: rows[order] are in the Hugging Face (split-halves RoPE) order."""
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    index = np.arange(rows, dtype=np.int64).reshape(rows, 1)
    return LlamaTensorProcessor()._reverse_permute_weights(index, heads, heads)[:, 0]

