"""Qwen2-VL / Qwen2.5-VL / Qwen3-VL's mmproj (projector types qwen2vl_merger,
qwen2.5vl_merger, qwen3vl_merger) onto mlx-vlm's own vision tower and merger, beside a
`qwen2vl` / `qwen3vl` text GGUF (issue #52).

What conversion/qwenvl.py Qwen2VLVisionModel did, undone here: the tower's fused qkv split
into q, k and v (joined back), the Conv3D patch embedding split into its two temporal
slices `v.patch_embd.weight` and `.weight.1` (stacked back, then torch's (out, in, t, kh, kw)
to MLX's (out, t, kh, kw, in)); `fullatt_block_indexes` written as the window-attention
period `clip.vision.n_wa_pattern`. What the file leaves out is what clip.cpp assumes: a
2 x 2 spatial merge, a 112-pixel attention window, 8 to 4096 image tokens an image.
The text GGUF's rotation becomes the engine's M-RoPE on the sections the GGUF carries.

Qwen3-VL (conversion/qwen3vl.py Qwen3VLVisionModel): its qkv stays fused, the Conv3D split
as above (its bias kept); the merger's norm and two matrices written as `v.post_ln`, `mm.0`
and `mm.2`, each DeepStack merger as `v.deepstack.{layer}.*` under the tower layer it reads
(`clip.vision.is_deepstack_layers` marks them); the position table's side is read from
`v.position_embd`. Its M-RoPE interleaves the sections' frequencies (llama.cpp's IMROPE, by
architecture), and the text model's first layers add the DeepStack levels.
"""

from __future__ import annotations

import importlib
from typing import Any

import gguf
import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten

from ..loader.errors import ModelLoadError
from ..loader.gguf_file import GgufFile
from . import deepstack, mrope

CLIP = gguf.Keys.ClipVision
# llama.cpp's projector type -> mlx-vlm's family
FAMILIES = {"qwen2vl_merger": "qwen2_vl", "qwen2.5vl_merger": "qwen2_5_vl",
            "qwen3vl_merger": "qwen3_vl"}
# Qwen3-VL's merger pieces (its Hugging Face names) -> the converter's GGUF names
QWEN3_MERGER = {"merger.norm": "v.post_ln", "merger.linear_fc1": "mm.0",
                "merger.linear_fc2": "mm.2"}
QWEN3_DEEPSTACK = {"norm": "norm", "linear_fc1": "fc1", "linear_fc2": "fc2"}
# clip.cpp (PROJECTOR_TYPE_QWEN2VL / QWEN25VL): what it takes when the file says nothing
MERGE, WINDOW, MIN_TOKENS, MAX_TOKENS = 2, 112, 8, 4096
SPECIALS = ("<|vision_start|>", "<|image_pad|>", "<|video_pad|>")


def mrope_sections(model: nn.Module) -> list[int] | None:
    """The (t, h, w) M-RoPE sections of a text GGUF's model (engine/loader/gguf_arch.py
    puts a qwen2vl GGUF's rope.dimension_sections in its rope_scaling), or None."""
    scaling = getattr(getattr(model, "args", None), "rope_scaling", None) or {}
    if scaling.get("type") != "mrope":
        return None
    return [int(s) for s in scaling["mrope_section"]]


def build(proj: GgufFile, model: nn.Module, hf_tok: Any) -> tuple[nn.Module, int, Any]:
    """mlx-vlm's Qwen-VL model (its tower and merger with the mmproj's weights, its
    language model a placeholder reading the GGUF's embeddings), the image token, and
    mlx-vlm's processor (install_mrope then turns the GGUF's rotation into M-RoPE)."""
    from mlx_vlm.models.qwen3_vl.processing_qwen3_vl import Qwen3VLImageProcessor

    from .mmproj import token_id

    m = proj.metadata
    family = family_of(proj)
    classes = importlib.import_module(f"mlx_vlm.models.{family}")
    processing = importlib.import_module(f"mlx_vlm.models.{family}.processing_{family}")
    args = model.args
    hidden = int(args.hidden_size)
    ids = {t: token_id(hf_tok, t, str(proj.path)) for t in SPECIALS}
    up = proj.tensors.get("v.blk.0.ffn_up.weight")
    if up is None:
        raise ModelLoadError(f"{proj.path}: the projector has no tensor v.blk.0.ffn_up.weight")
    vision = _vision_config(m, family, hidden, int(up.shape[0]))
    if family == "qwen3_vl":
        vision.update(_qwen3_vision(proj))
    text = {"model_type": family, "hidden_size": hidden, "num_hidden_layers": 1,
            "intermediate_size": 1, "num_attention_heads": 1, "num_key_value_heads": 1,
            "head_dim": 1, "max_position_embeddings": 1,
            "vocab_size": 1, "rms_norm_eps": 1e-6, "rope_theta": float(args.rope_theta),
            "rope_scaling": {"type": "mrope", "mrope_section": mrope_sections(model)},
            "tie_word_embeddings": True}
    config = {**text, "image_token_id": ids["<|image_pad|>"],
              "video_token_id": ids["<|video_pad|>"],
              "vision_start_token_id": ids["<|vision_start|>"], "vision_config": vision,
              "text_config": text}
    model_config = classes.ModelConfig.from_dict(dict(config))
    model_config.text_config = classes.TextConfig.from_dict(text)
    model_config.vision_config = classes.VisionConfig.from_dict(vision)
    vlm = classes.Model(model_config)
    # mlx-vlm's merge and get_rope_index read its language model: the GGUF's embeddings
    vlm.language_model.model.embed_tokens = model.model.embed_tokens
    _load_weights(vlm, proj)
    unit = int(m[CLIP.PATCH_SIZE]) * vision["spatial_merge_size"]
    images = Qwen3VLImageProcessor(
        patch_size=int(m[CLIP.PATCH_SIZE]), temporal_patch_size=2,
        merge_size=vision["spatial_merge_size"], min_pixels=MIN_TOKENS * unit * unit,
        max_pixels=MAX_TOKENS * unit * unit, image_mean=list(m[CLIP.IMAGE_MEAN]),
        image_std=list(m[CLIP.IMAGE_STD]))
    processor_class = {"qwen2_5_vl": "Qwen2_5_VLProcessor", "qwen2_vl": "Qwen2VLProcessor",
                       "qwen3_vl": "Qwen3VLProcessor"}[family]
    processor_class = getattr(processing, processor_class)
    processor = processor_class(images, hf_tok, chat_template=hf_tok.chat_template)
    return vlm, ids["<|image_pad|>"], processor


def install_mrope(model: nn.Module, family: str, vlm: nn.Module) -> mrope.PositionFeed:
    """The engine's M-RoPE in the GGUF's text model (plain RoPE until then: a text token's
    three positions are equal, so text alone runs the same either way), and Qwen3-VL's
    DeepStack levels in its first layers (as many as `vlm`'s tower gives)."""
    args = model.args
    text = {"num_attention_heads": args.num_attention_heads, "hidden_size": args.hidden_size,
            "head_dim": getattr(args, "head_dim", None), "rope_theta": args.rope_theta,
            "rope_scaling": {"type": "mrope", "mrope_section": mrope_sections(model)}}
    feed = mrope.install(model, family, text)
    assert feed is not None
    deepstack.install(model, feed, deepstack_levels(vlm))
    return feed


def family_of(proj: GgufFile) -> str:
    """mlx-vlm's family of a Qwen-VL mmproj."""
    from .mmproj_support import projector_type

    return FAMILIES[str(projector_type(proj.metadata))]


def _vision_config(m: dict[str, Any], family: str, hidden: int,
                   ffn_width: int) -> dict[str, Any]:
    """mlx-vlm's vision config (`ffn_width`: the tower's feed-forward width, read from its
    tensors: for Qwen2-VL the converter writes the merger's output width as
    feed_forward_length, and clip.cpp reads the tensors' shapes)."""
    depth, width = int(m[CLIP.BLOCK_COUNT]), int(m[CLIP.EMBEDDING_LENGTH])
    patch = int(m[CLIP.PATCH_SIZE])
    common = {"model_type": family, "depth": depth,
              "num_heads": int(m[CLIP.Attention.HEAD_COUNT]),
              "patch_size": patch, "spatial_patch_size": patch,
              "spatial_merge_size": int(m.get(CLIP.SPATIAL_MERGE_SIZE, MERGE)),
              "temporal_patch_size": 2, "in_channels": 3}
    if family == "qwen3_vl":
        return {**common, "hidden_size": width, "intermediate_size": ffn_width,
                "out_hidden_size": hidden}
    if family == "qwen2_vl":  # embed_dim inside the tower, hidden_size what it gives
        return {**common, "embed_dim": width, "hidden_size": hidden,
                "mlp_ratio": ffn_width / width}
    # clip.cpp: layer il attends fully when (il + 1) % n_wa_pattern == 0 (no pattern: all)
    period = int(m.get(CLIP.N_WA_PATTERN, 1)) or 1
    full = [i for i in range(depth) if (i + 1) % period == 0]
    return {**common, "hidden_size": width, "intermediate_size": ffn_width,
            "out_hidden_size": hidden, "window_size": WINDOW, "fullatt_block_indexes": full}


def _qwen3_vision(proj: GgufFile) -> dict[str, Any]:
    """Qwen3-VL's tower keys the file holds as tensors and flags: the position table's
    size, the layers DeepStack reads."""
    table = proj.tensors.get("v.position_embd.weight")
    if table is None:
        raise ModelLoadError(f"{proj.path}: the projector has no tensor v.position_embd.weight")
    marks = np.asarray(proj.metadata.get(CLIP.IS_DEEPSTACK_LAYERS, ()), dtype=bool).tolist()
    return {"num_position_embeddings": int(table.shape[0]),
            "deepstack_visual_indexes": [i for i, on in enumerate(marks) if on]}


def deepstack_levels(vlm: nn.Module) -> int:
    """How many DeepStack levels mlx-vlm's tower gives (0: none, or not Qwen3-VL)."""
    return len(getattr(vlm.vision_tower, "deepstack_visual_indexes", None) or ())


def _gguf_name(hf: str, names: Any, vlm: nn.Module) -> str | None:
    """The converter's GGUF name of a tower / merger parameter's Hugging Face name."""
    base, _, suffix = hf.rpartition(".")
    inner = base.removeprefix("visual.")
    if inner in QWEN3_MERGER:
        return f"{QWEN3_MERGER[inner]}.{suffix}"
    if inner.startswith("deepstack_merger_list."):
        _, index, part = inner.split(".")
        layer = vlm.vision_tower.deepstack_visual_indexes[int(index)]
        return f"v.deepstack.{layer}.{QWEN3_DEEPSTACK[part]}.{suffix}"
    mapped = names.get_name(base)
    return f"{mapped}.{suffix}" if mapped else None


def _load_weights(vlm: nn.Module, proj: GgufFile) -> None:
    """The mmproj's tensors as the tower's and merger's weights, float32."""
    from .mmproj import floats, install

    source = str(proj.path)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, int(proj.metadata[CLIP.BLOCK_COUNT]))
    weights, used = [], set()
    split_qkv = family_of(proj) != "qwen3_vl"  # Qwen3-VL's converter keeps it fused

    def tensor(hf: str) -> tuple[str, np.ndarray]:
        mapped = _gguf_name(hf, names, vlm)
        t = proj.tensors.get(mapped) if mapped else None
        if t is None:
            raise ModelLoadError(f"{source}: the projector has no tensor for {hf} "
                                 f"({mapped or 'no GGUF name'})")
        used.add(t.name)
        return t.name, floats(t)

    for name, value in tree_flatten(vlm.parameters()):
        if name.startswith("language_model."):
            continue
        hf = name.replace("vision_tower.", "visual.", 1)
        if name.endswith("patch_embed.proj.weight"):
            first, w0 = tensor(hf)
            w1 = proj.tensors.get(f"{first}.1")
            if w1 is None:
                raise ModelLoadError(f"{source}: the projector has no tensor {first}.1 "
                                     "(the patch embedding's second frame)")
            used.add(w1.name)
            # the converter's two Conv2D slices back into the Conv3D, in MLX's layout
            w = np.stack([w0, floats(w1)], axis=2).transpose(0, 2, 3, 4, 1)
            label = first
        elif ".attn.qkv." in hf and split_qkv:
            parts = [tensor(hf.replace(".qkv.", f".{x}.")) for x in "qkv"]
            w, label = np.concatenate([p[1] for p in parts]), parts[0][0]
        else:
            label, w = tensor(hf)
        if tuple(w.shape) != tuple(value.shape):
            raise ModelLoadError(f"{source}: tensor {label} is {tuple(w.shape)}, "
                                 f"mlx-vlm's {name} is {tuple(value.shape)}")
        weights.append((name, mx.array(w)))
    install(vlm, weights, proj, used, "Qwen-VL")
