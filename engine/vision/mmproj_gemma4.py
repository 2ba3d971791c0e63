"""Gemma 4's mmproj (projector type gemma4v) onto mlx-vlm's own Gemma 4 vision encoder and
multimodal embedder, beside a `gemma4` text GGUF (issue #52).

What conversion/gemma.py Gemma4VisionAudioModel did, undone here: the encoder's layers renamed
(`model.vision_tower.encoder.` as `vision_model.model.`, each ClippableLinear's `.linear.`
dropped) before gguf-py's MMPROJ name map; the patch embedding, a Linear over a patch's
(row, column, channel) values, viewed as a convolution (out, channel, row, column); scalar
clip bounds (`input_min` ...) as 1-element tensors; `clip.vision.image_size` written as 224
whatever the checkpoint (unused: the encoder takes any size). What the file leaves out is
what clip.cpp (PROJECTOR_TYPE_GEMMA4V) takes: a vision RoPE of base 100, 3 x 3 pooling
unless `clip.vision.projector.scale_factor` says (the pooled features scaled by
sqrt(width), as mlx-vlm's pooler does), and image tokens that attend both ways unless
the text model is 1536 or 2560 wide (E2B, E4B: mtmd_decode_use_non_causal; the GGUF has no
such key). The image's token
count is the checkpoint processor's default budget (280), not clip.cpp's 70 to 1120. E2B's
and E4B's mmproj hold their audio encoder too (`a.*`, `mm.a.*`): taken as read, as the
engine reads images, not sound.
"""

from __future__ import annotations

from typing import Any

import gguf
import mlx.nn as nn
from mlx.utils import tree_flatten

from ..loader.errors import ModelLoadError
from ..loader.gguf_file import GgufFile

CLIP = gguf.Keys.ClipVision
# the named tokens Gemma4Processor reads from its tokenizer (Gemma 4's vocabulary; clip.cpp
# wraps an image in <|image> ... <image|>)
TOKENS = {"boi_token": "<|image>", "image_token": "<|image|>", "eoi_token": "<image|>"}
POOLING = 3  # clip.cpp's n_merge for gemma4v (Gemma4VisionPooler's kernel)
ROPE_BASE = 100.0  # clip.cpp's hparams.rope_theta for gemma4v
SOFT_TOKENS = 280  # Gemma4ImageProcessor's max_soft_tokens (the checkpoints' default)
CAUSAL_WIDTHS = (1536, 2560)  # E2B, E4B: their images attend causally (mtmd.cpp)
# the suffixes the converter maps by (Gemma4VisionAudioModel.modify_tensors)
SUFFIXES = (".weight", ".bias", ".input_max", ".input_min", ".output_max", ".output_min")
AUDIO = ("a.", "mm.a.")  # gguf-py: every audio tensor's name starts so


def _audio(name: str) -> bool:
    return name.startswith(AUDIO)


def bidirectional(text_width: int) -> bool:
    """Whether a Gemma 4 pair's image tokens attend both ways, as llama.cpp decides it: by
    the text model's width (its GGUF does not say use_bidirectional_attention)."""
    return text_width not in CAUSAL_WIDTHS


def build(proj: GgufFile, model: nn.Module, hf_tok: Any) -> tuple[nn.Module, int, Any]:
    """mlx-vlm's Gemma 4 model (its vision encoder and embedder with the mmproj's weights,
    its language model reading the GGUF's embeddings), the image token, and mlx-vlm's
    Gemma4Processor."""
    from mlx_vlm.models import gemma4
    from mlx_vlm.models.gemma4.processing_gemma4 import Gemma4ImageProcessor, Gemma4Processor

    from .mmproj import token_id

    m = proj.metadata
    table = proj.tensors.get("v.position_embd.weight")
    if table is None:
        raise ModelLoadError(f"{proj.path}: the projector has no tensor v.position_embd.weight")
    ids = {k: token_id(hf_tok, t, str(proj.path)) for k, t in TOKENS.items()}
    for name, token in TOKENS.items():  # what Gemma4Processor reads of its tokenizer
        setattr(hf_tok, name, token)
        setattr(hf_tok, f"{name}_id", ids[name])
    hidden = int(model.args.hidden_size)
    width, heads = int(m[CLIP.EMBEDDING_LENGTH]), int(m[CLIP.Attention.HEAD_COUNT])
    patch, pooling = int(m[CLIP.PATCH_SIZE]), int(m.get(CLIP.Projector.SCALE_FACTOR, POOLING))
    clipped = any(n.endswith(SUFFIXES[2:]) for n in proj.tensors if not _audio(n))
    vision = {"model_type": "gemma4_vision", "hidden_size": width,
              "intermediate_size": int(m[CLIP.FEED_FORWARD_LENGTH]),
              "num_hidden_layers": int(m[CLIP.BLOCK_COUNT]), "num_attention_heads": heads,
              "num_key_value_heads": heads, "head_dim": width // heads,
              "global_head_dim": width // heads, "patch_size": patch,
              "position_embedding_size": int(table.shape[1]), "pooling_kernel_size": pooling,
              "default_output_length": SOFT_TOKENS,
              "rms_norm_eps": float(m.get(CLIP.Attention.LAYERNORM_EPS, 1e-6)),
              "rope_parameters": {"rope_theta": ROPE_BASE, "rope_type": "default"},
              "use_clipped_linears": clipped, "standardize": "v.std_bias" in proj.tensors}
    # a placeholder language model (never run: the engine runs the GGUF's)
    text = {"model_type": "gemma4_text", "hidden_size": hidden, "num_hidden_layers": 1,
            "intermediate_size": 1, "num_attention_heads": 1, "num_key_value_heads": 1,
            "head_dim": 1, "global_head_dim": 1, "vocab_size": 1,
            "vocab_size_per_layer_input": 1, "hidden_size_per_layer_input": 0,
            "num_kv_shared_layers": 0, "layer_types": ["full_attention"]}
    config = {"model_type": "gemma4", "hidden_size": hidden, "vision_soft_tokens_per_image":
              SOFT_TOKENS, "pad_token_id": hf_tok.pad_token_id or 0,
              **{k.replace("_token", "_token_id"): v for k, v in ids.items()}}
    model_config = gemma4.ModelConfig.from_dict(dict(config, text_config=text,
                                                     vision_config=vision))
    model_config.text_config = gemma4.TextConfig.from_dict(text)
    model_config.vision_config = gemma4.VisionConfig.from_dict(vision)
    vlm = gemma4.Model(model_config)
    # what mlx-vlm's merge reads of its language model: the GGUF's embeddings, scaled as
    # its own text model scales them (per-layer inputs: the engine's text model makes them)
    lm = nn.Module()
    lm.model = nn.Module()
    lm.model.embed_tokens = model.model.embed_tokens
    lm.model.embed_scale = hidden**0.5
    lm.model.hidden_size_per_layer_input = 0
    vlm.language_model = lm
    _load_weights(vlm, proj)
    mean, std = list(m[CLIP.IMAGE_MEAN]), list(m[CLIP.IMAGE_STD])
    images = Gemma4ImageProcessor(
        patch_size=patch, max_soft_tokens=SOFT_TOKENS, pooling_kernel_size=pooling,
        image_mean=mean, image_std=std,
        # clip.cpp normalizes by the file's mean and std (Gemma 4's: 0 and 1, a no-op)
        do_normalize=any(x != 0.0 for x in mean) or any(x != 1.0 for x in std))
    processor = Gemma4Processor(images, hf_tok, chat_template=hf_tok.chat_template,
                                image_seq_length=SOFT_TOKENS)
    return vlm, ids["image_token"], processor


def _hf_name(name: str) -> str:
    """The name conversion/gemma.py maps by, of mlx-vlm's parameter `name` (Hugging Face's
    less its `model.`)."""
    hf = f"model.{name}".replace("model.vision_tower.encoder.", "vision_model.model.")
    hf = hf.replace(".linear.weight", ".weight")
    return hf + ".weight" if hf.endswith("position_embedding_table") else hf


def _load_weights(vlm: nn.Module, proj: GgufFile) -> None:
    """The mmproj's tensors as the encoder's and embedder's weights, float32."""
    from .mmproj import floats, install, shaped_as

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, int(proj.metadata[CLIP.BLOCK_COUNT]))
    weights, used = [], {n for n in proj.tensors if _audio(n)}  # (sound: not read here)
    for name, value in tree_flatten(vlm.parameters()):
        if name.startswith("language_model."):
            continue
        gguf_name = names.get_name(_hf_name(name), try_suffixes=SUFFIXES)
        tensor = proj.tensors.get(gguf_name) if gguf_name else None
        if tensor is None:
            raise ModelLoadError(f"{proj.path}: the projector has no tensor for {name} "
                                 f"({gguf_name or 'no GGUF name'})")
        used.add(tensor.name)
        w = floats(tensor)
        if name.endswith("patch_embedder.input_proj.weight"):  # (out, 3, p, p) -> the
            w = w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1)  # Linear's (out, p * p * 3)
        if value.ndim == 0:  # a clip bound, written as a 1-element tensor
            w = w.reshape(())
        weights.append((name, shaped_as(proj, gguf_name, w, name, value)))
    install(vlm, weights, proj, used, "gemma4v")
