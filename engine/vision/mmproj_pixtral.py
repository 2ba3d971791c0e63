"""A llama.cpp mmproj of projector type pixtral onto mlx-vlm's own Pixtral tower, beside a
`mistral3` (or older `llama`) text GGUF (issue #52): Mistral Small 3.1 / Mistral 3's (with a
patch merger: mlx-vlm's Mistral 3 model and projector) or Pixtral 12B's (no merger,
LLaVA's two-layer projector, a token a patch: mlx-vlm's Pixtral model), told apart as
clip.cpp tells them, by `mm.patch_merger.weight`.

What conversion/llava.py LlavaVisionModel did, undone here: the tower's q and k rows
permuted as LlamaModel.permute does a text model's (put back in Hugging Face's order), the
patch convolution in torch's (out, in, kh, kw) layout. A file may hold the [IMG_BREAK]
token's embedding copied out of the text model as `v.token_embd.img_break` (clip.cpp adds
it itself; a Hugging Face checkpoint's conversion leaves it out now, its embeddings being
filtered as the language model's): here the prompt holds the [IMG_BREAK] tokens the
processor writes, read from the text GGUF's own table like every other token, so the copy
is taken as read. What the file leaves out is what clip.cpp assumes: a 2-D RoPE of base
10000 in the tower, no merge unless `clip.vision.spatial_merge_size` says, and for
Pixtral 12B's projector (clip.cpp's LlavaMultiModalProjector, GELU) its biases
(mlx-vlm's projector has them: a file without them is refused by name).
"""

from __future__ import annotations

from typing import Any

import gguf
import mlx.nn as nn
from mlx.utils import tree_flatten

from ..loader.gguf_arch import rope_row_order
from ..loader.gguf_file import GgufFile

CLIP = gguf.Keys.ClipVision
TOKENS = ("[IMG]", "[IMG_BREAK]", "[IMG_END]")
IMG_BREAK = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.V_TOK_EMBD_IMG_BREAK]  # (no suffix)
ROPE_BASE = 10000.0  # clip.cpp's PROJECTOR_TYPE_PIXTRAL hparams.rope_theta


def build(proj: GgufFile, model: nn.Module, hf_tok: Any) -> tuple[nn.Module, int, Any]:
    """mlx-vlm's Mistral 3 model (a patch merger) or Pixtral model (none) (its tower and
    projector with the mmproj's weights, its language model reading the GGUF's
    embeddings), the image token, and mlx-vlm's processor with its Pixtral image
    processor."""
    from mlx_vlm.models import mistral3, pixtral
    from mlx_vlm.models.mistral3.processing_mistral3 import Mistral3Processor
    from mlx_vlm.models.pixtral.image_processing_pixtral import PixtralImageProcessor
    from mlx_vlm.models.pixtral.processing_pixtral import PixtralProcessor

    from .mmproj import _placeholder_text, token_id

    m = proj.metadata
    merged = "mm.patch_merger.weight" in proj.tensors  # Mistral 3's, not Pixtral 12B's
    ids = {t: token_id(hf_tok, t, str(proj.path)) for t in TOKENS}
    args = model.args
    hidden = int(args.hidden_size)
    width, heads = int(m[CLIP.EMBEDDING_LENGTH]), int(m[CLIP.Attention.HEAD_COUNT])
    patch, merge = int(m[CLIP.PATCH_SIZE]), int(m.get(CLIP.SPATIAL_MERGE_SIZE, 1))
    vision = {"model_type": "pixtral", "num_hidden_layers": int(m[CLIP.BLOCK_COUNT]),
              "hidden_size": width, "head_dim": width // heads,
              "intermediate_size": int(m[CLIP.FEED_FORWARD_LENGTH]),
              "num_attention_heads": heads, "image_size": int(m[CLIP.IMAGE_SIZE]),
              "patch_size": patch, "num_channels": 3, "rope_theta": ROPE_BASE,
              "rms_norm_eps": float(m.get(CLIP.Attention.LAYERNORM_EPS, 1e-5))}
    # the projector's norm takes the text model's epsilon (mlx-vlm's and transformers')
    text = _placeholder_text(hidden, "mistral", rms_norm_eps=float(args.rms_norm_eps))
    config = {"model_type": "mistral3" if merged else "pixtral",
              "image_token_index": ids["[IMG]"], "vision_feature_layer": -1}
    if merged:
        config.update(spatial_merge_size=merge,
                      multimodal_projector_bias="mm.1.bias" in proj.tensors)
    classes = mistral3 if merged else pixtral
    model_config = classes.ModelConfig.from_dict(dict(config, text_config=text,
                                                      vision_config=vision))
    model_config.text_config = classes.TextConfig.from_dict(text)
    model_config.vision_config = classes.VisionConfig.from_dict(vision)
    vlm = classes.Model(model_config)
    vlm.language_model.model.embed_tokens = model.model.embed_tokens
    _load_weights(vlm, proj, heads)
    images = PixtralImageProcessor(
        size={"longest_edge": vision["image_size"]}, patch_size={"height": patch, "width": patch},
        image_mean=list(m[CLIP.IMAGE_MEAN]), image_std=list(m[CLIP.IMAGE_STD]))
    made = Mistral3Processor if merged else PixtralProcessor
    processor = made(images, hf_tok, patch_size=patch, spatial_merge_size=merge,
                     chat_template=hf_tok.chat_template)
    return vlm, ids["[IMG]"], processor


def _load_weights(vlm: nn.Module, proj: GgufFile, heads: int) -> None:
    """The mmproj's tensors as the tower's and projector's weights, float32."""
    from .mmproj import install, mapped_tensor, shaped_as

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, int(proj.metadata[CLIP.BLOCK_COUNT]))
    weights, used = [], {IMG_BREAK} & set(proj.tensors)
    for name, value in tree_flatten(vlm.parameters()):
        if name.startswith("language_model."):
            continue
        # Hugging Face's name (mlx-vlm keeps the tower under vision_tower.vision_model.)
        hf = name.replace("vision_tower.vision_model.", "vision_tower.", 1)
        gguf_name, w = mapped_tensor(proj, names, hf, name, used)
        if name.endswith("patch_conv.weight"):
            w = w.transpose(0, 2, 3, 1)  # torch's (out, in, kh, kw) -> mlx's (out, kh, kw, in)
        if hf.rpartition(".")[0].endswith(("attention.q_proj", "attention.k_proj")):
            w = w[rope_row_order(w.shape[0], heads)]  # LlamaModel.permute undone
        weights.append((name, shaped_as(proj, gguf_name, w, name, value)))
    install(vlm, weights, proj, used, "pixtral")
