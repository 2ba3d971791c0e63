"""LFM2-VL's mmproj (projector type lfm2) onto mlx-vlm's own SigLIP2 tower and LFM2-VL
projector, beside an `lfm2` text GGUF (issue #52).

What conversion/lfm2.py LFM2VLModel did, undone here: the patch embedding, a Linear over
a patch's (row, column, channel) values in the checkpoint, viewed as a convolution
(out, channel, row, column); `clip.vision.image_size` written as 256 whatever the
checkpoint (its tower takes any size: mlx-vlm's reads the position table's size from
`v.position_embd`). What the file leaves out is what clip.cpp and the checkpoints' processor
take: 64 to 256 image tokens an image, 512-pixel tiles with a thumbnail for a larger image.
"""

from __future__ import annotations

from typing import Any

import gguf
import mlx.nn as nn
from mlx.utils import tree_flatten

from ..loader.errors import ModelLoadError
from ..loader.gguf_file import GgufFile

CLIP = gguf.Keys.ClipVision
# clip.cpp PROJECTOR_TYPE_LFM2 (set_limit_image_tokens(64, 256)) and LFM2-VL's processor
MIN_TOKENS, MAX_TOKENS, TILE = 64, 256, 512
IMAGE_TOKEN = "<image>"


def build(proj: GgufFile, model: nn.Module, hf_tok: Any) -> tuple[nn.Module, int, Any]:
    """mlx-vlm's LFM2-VL model (its tower and projector with the mmproj's weights, its
    language model reading the GGUF's embeddings), the image token, and the processor
    (transformers' Lfm2VlProcessor with mlx-vlm's image processor)."""
    from mlx_vlm.models import lfm2_vl
    from mlx_vlm.models.lfm2_vl.processing_lfm2_vl import Lfm2VlNumpyImageProcessor
    from transformers import Lfm2VlProcessor

    from .mmproj import token_id

    m = proj.metadata
    table, proj_in = (proj.tensors.get(n) for n in ("v.position_embd.weight", "mm.1.weight"))
    if table is None or proj_in is None:
        raise ModelLoadError(f"{proj.path}: the projector has no tensor "
                             f"{'v.position_embd.weight' if table is None else 'mm.1.weight'}")
    image_token = token_id(hf_tok, IMAGE_TOKEN, str(proj.path))
    hidden = int(model.args.hidden_size)
    patch, factor = int(m[CLIP.PATCH_SIZE]), int(m.get(CLIP.Projector.SCALE_FACTOR, 2))
    vision = {"model_type": "lfm2_vl", "hidden_size": int(m[CLIP.EMBEDDING_LENGTH]),
              "intermediate_size": int(m[CLIP.FEED_FORWARD_LENGTH]),
              "num_hidden_layers": int(m[CLIP.BLOCK_COUNT]),
              "num_attention_heads": int(m[CLIP.Attention.HEAD_COUNT]), "num_channels": 3,
              "image_size": int(m[CLIP.IMAGE_SIZE]), "patch_size": patch,
              "num_patches": int(table.shape[0]),
              "layer_norm_eps": float(m.get(CLIP.Attention.LAYERNORM_EPS, 1e-6))}
    # a placeholder language model (never run: the engine runs the GGUF's)
    text = {"model_type": "lfm2", "hidden_size": hidden, "num_hidden_layers": 1,
            "intermediate_size": 1, "block_ff_dim": 1, "block_auto_adjust_ff_dim": False,
            "num_attention_heads": 1, "num_key_value_heads": 1, "vocab_size": 1,
            "block_dim": hidden, "conv_dim": hidden, "conv_dim_out": hidden,
            "layer_types": ["full_attention"], "full_attn_idxs": [0]}
    config = {"model_type": "lfm2-vl", "downsample_factor": factor, "encoder_patch_size": patch,
              "image_token_id": image_token, "min_image_tokens": MIN_TOKENS,
              "max_image_tokens": MAX_TOKENS, "tile_size": TILE,
              "projector_hidden_size": int(proj_in.shape[0]),
              "projector_bias": "mm.1.bias" in proj.tensors,
              "projector_use_layernorm": "mm.input_norm.weight" in proj.tensors}
    model_config = lfm2_vl.ModelConfig.from_dict(dict(config, text_config=text,
                                                      vision_config=vision))
    model_config.text_config = lfm2_vl.TextConfig.from_dict(text)
    model_config.vision_config = lfm2_vl.VisionConfig.from_dict(vision)
    vlm = lfm2_vl.Model(model_config)
    lm = nn.Module()  # what mlx-vlm's merge reads of its language model: the embeddings
    lm.model = nn.Module()
    lm.model.embed_tokens = model.model.embed_tokens
    vlm.language_model = lm
    _load_weights(vlm, proj)
    images = Lfm2VlNumpyImageProcessor(
        image_mean=list(m[CLIP.IMAGE_MEAN]), image_std=list(m[CLIP.IMAGE_STD]),
        downsample_factor=factor, encoder_patch_size=patch, min_image_tokens=MIN_TOKENS,
        max_image_tokens=MAX_TOKENS, tile_size=TILE)
    processor = Lfm2VlProcessor(images, hf_tok, chat_template=hf_tok.chat_template)
    return vlm, image_token, processor


def _load_weights(vlm: nn.Module, proj: GgufFile) -> None:
    """The mmproj's tensors as the tower's and projector's weights, float32."""
    from .mmproj import install, mapped_tensor, shaped_as

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, int(proj.metadata[CLIP.BLOCK_COUNT]))
    weights, used = [], set()
    for name, value in tree_flatten(vlm.parameters()):
        if name.startswith("language_model."):
            continue
        # Hugging Face's name (its tower under vision_tower.vision_model.)
        hf = name.replace("vision_tower.", "vision_tower.vision_model.", 1)
        gguf_name, w = mapped_tensor(proj, names, hf, name, used)
        if name.endswith("patch_embedding.weight"):  # (out, 3, p, p) -> the Linear's
            w = w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1)  # (out, p * p * 3)
        weights.append((name, shaped_as(proj, gguf_name, w, name, value)))
    install(vlm, weights, proj, used, "lfm2")
