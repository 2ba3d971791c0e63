"""A GGUF language model and its llama.cpp mmproj file loaded as one VLM (issue #52).

The text GGUF loads as any GGUF does (engine/loader/gguf.py: mlx-lm's class, the engine's
kernels). The mmproj's vision tower and projector become mlx-vlm's own modules for the
family (Gemma 3's SigLIP + average-pooling projector, Idefics3 / SmolVLM's SigLIP +
pixel-shuffle connector here; Qwen-VL's in mmproj_qwen.py, Mistral 3's in mmproj_pixtral.py,
LFM2-VL's in mmproj_lfm2.py, Gemma 4's in mmproj_gemma4.py), their weights found by
gguf-py's MMPROJ name map of mlx-vlm's names and put back in mlx-vlm's layout (what
convert_hf_to_gguf.py did: the patch embedding as torch's conv weight, Gemma 3's soft
embedding norm plus one). mlx-vlm's merge reads the text GGUF's own embedding table. The
processor is mlx-vlm's for the family, with transformers' image processor built from the
mmproj's sizes, mean and std, and the GGUF's tokenizer and chat template.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gguf
import mlx.core as mx
import mlx.nn as nn
import numpy as np
from gguf import GGMLQuantizationType
from mlx.utils import tree_flatten, tree_unflatten

from ..loader.errors import ModelLoadError
from ..loader.gguf_file import GgufFile, read_gguf_file
from ..loader.progress import ProgressReporter
from ..loader.source_check import mmproj_file
from . import image_mask, mmproj_gemma4, mmproj_lfm2, mmproj_pixtral, mmproj_qwen, scaled_rows
from .mmproj_support import mmproj_beside, projector_refusal, projector_type
from .prompt import VisionTower

CLIP = gguf.Keys.ClipVision  # the mmproj's vision keys (clip.vision.*)
# the named tokens each family's processor reads from its tokenizer
GEMMA3_TOKENS = {"boi_token": "<start_of_image>", "image_token": "<image_soft_token>",
                 "eoi_token": "<end_of_image>"}
IDEFICS3_IMAGE = "<image>"
# mlx-lm's model type of a text GGUF -> its GGUF architecture (mmproj_support.PROJECTORS)
TEXT_ARCHITECTURES = {"gemma3_text": "gemma3", "gemma4_text": "gemma4", "ministral3": "mistral3"}


def _text_architecture(model: nn.Module) -> str | None:
    """The GGUF architecture of the loaded text model (a qwen2 / qwen3 model with M-RoPE
    sections is a qwen2vl / qwen3vl GGUF's: engine/loader/gguf_arch.py)."""
    kind = getattr(getattr(model, "args", None), "model_type", None)
    if kind in ("qwen2", "qwen3") and mmproj_qwen.mrope_sections(model) is not None:
        return f"{kind}vl"
    return TEXT_ARCHITECTURES.get(kind, kind)


def load_pair(text: Path, mmproj: Path, quantized: bool | None, report: ProgressReporter,
              cpu: Any) -> dict[str, Any]:
    """The LoadedModel fields of the GGUF `text` with the vision of `mmproj`, `vision`
    among them. ModelLoadError names what does not fit (the projector type first)."""
    from ..loader.gguf import load_gguf

    proj = read_projector(mmproj, report)
    return with_vision(load_gguf(text, quantized, report, cpu), text, proj)


def read_projector(mmproj: Path, report: ProgressReporter) -> GgufFile:
    """The mmproj file, refused (ModelLoadError) when its projector type is not mapped."""
    report("reading file", 0.0)
    proj = read_gguf_file(mmproj)
    reason = projector_refusal(proj.metadata, None)
    if reason:
        raise ModelLoadError(f"{mmproj}: {reason}")
    return proj


def with_vision(fields: dict[str, Any], text: Path, proj: GgufFile) -> dict[str, Any]:
    """A loaded text GGUF's fields given the image side of the projector `proj`."""
    mmproj = proj.path
    model, tokenizer = fields["model"], fields["tokenizer"]
    reason = projector_refusal(proj.metadata, _text_architecture(model))
    if reason:
        raise ModelLoadError(f"{mmproj}: {reason}")
    hidden = _text_hidden(model)
    if int(proj.metadata.get(CLIP.PROJECTION_DIM, hidden)) != hidden:
        raise ModelLoadError(f"{mmproj}: its projector gives {proj.metadata[CLIP.PROJECTION_DIM]}"
                             f"-wide features, {text.name}'s embeddings are {hidden} wide "
                             "(the projector of another model?)")
    family = projector_type(proj.metadata)
    hf_tok = tokenizer._tokenizer
    # SmolVLM and Idefics3 share the projector type; their processors differ a little
    # (SmolVLM's image prompt): told apart by the files' names
    names = f"{proj.metadata.get('general.name', '')} {mmproj.name} {text.name}"
    try:
        if family == "gemma3":
            vlm, image_token, processor = _gemma3(proj, model, hf_tok)
        elif family in mmproj_qwen.FAMILIES:
            vlm, image_token, processor = mmproj_qwen.build(proj, model, hf_tok)
        elif family == "pixtral":
            vlm, image_token, processor = mmproj_pixtral.build(proj, model, hf_tok)
        elif family == "lfm2":
            vlm, image_token, processor = mmproj_lfm2.build(proj, model, hf_tok)
        elif family == "gemma4v":
            vlm, image_token, processor = mmproj_gemma4.build(proj, model, hf_tok)
        else:
            vlm, image_token, processor = _idefics3(proj, model, hf_tok,
                                                    "smolvlm" in names.lower())
    except (KeyError, TypeError, ValueError) as e:  # a key the mmproj lacks, a config
        raise ModelLoadError(f"{mmproj}: mlx-vlm cannot build its {family} vision side: "
                             f"{type(e).__name__}: {e}") from e
    positioned = family in mmproj_qwen.FAMILIES
    both_ways = family == "gemma4v" and mmproj_gemma4.bidirectional(hidden)
    if positioned:  # M-RoPE: the text model rotates by the image's 3-D positions
        mmproj_qwen.install_mrope(model, mmproj_qwen.family_of(proj), vlm)
    elif family == "gemma4v":  # (its builder loads its weights) rows fed already scaled
        scaled_rows.install(model, "gemma4")
        if both_ways:
            image_mask.install(model)
    elif family not in ("pixtral", "lfm2"):  # the Qwen-VL, Pixtral, LFM2 builders load theirs
        _load_vision_weights(vlm, proj, family)
    return {**fields, "vision": VisionTower(vlm, processor, image_token, positioned=positioned,
                                            bidirectional=both_ways),
            "description": fields["description"].replace(
                " GGUF,", f" GGUF + {mmproj.name} (sees images),", 1)}


def _text_hidden(model: nn.Module) -> int:
    """The text model's embedding width (its embeddings may be packed: ask the model)."""
    return int(model.args.hidden_size)


def _vision_config(m: dict[str, Any], model_type: str) -> dict[str, Any]:
    return {"model_type": model_type, "num_hidden_layers": int(m[CLIP.BLOCK_COUNT]),
            "hidden_size": int(m[CLIP.EMBEDDING_LENGTH]),
            "intermediate_size": int(m[CLIP.FEED_FORWARD_LENGTH]),
            "num_attention_heads": int(m[CLIP.Attention.HEAD_COUNT]),
            "patch_size": int(m[CLIP.PATCH_SIZE]), "image_size": int(m[CLIP.IMAGE_SIZE]),
            "num_channels": 3, "layer_norm_eps": float(m.get(CLIP.Attention.LAYERNORM_EPS, 1e-6))}


def _placeholder_text(hidden: int, model_type: str, **more: Any) -> dict[str, Any]:
    """A text config for mlx-vlm's class whose language model is never run (the engine
    runs the GGUF's): one tiny layer, the real width the projector and merge read."""
    return {"model_type": model_type, "hidden_size": hidden, "num_hidden_layers": 1,
            "intermediate_size": 1, "num_attention_heads": 1, "num_key_value_heads": 1,
            "head_dim": 1, "vocab_size": 1, "rms_norm_eps": 1e-6, **more}


def token_id(hf_tok: Any, token: str, mmproj: str) -> int:
    found = hf_tok.convert_tokens_to_ids(token)
    if not isinstance(found, int) or hf_tok.convert_ids_to_tokens(found) != token:
        raise ModelLoadError(f"{mmproj}: the GGUF's vocabulary has no {token} token for "
                             "its images")
    return found


def _gemma3(proj: GgufFile, model: nn.Module, hf_tok: Any) -> tuple[nn.Module, int, Any]:
    from mlx_vlm.models import gemma3
    from mlx_vlm.models.gemma3.processing_gemma3 import Gemma3Processor
    from transformers import Gemma3ImageProcessorPil

    m = proj.metadata
    vision = _vision_config(m, "siglip_vision_model")
    # clip.cpp: the projector pools (image / patch) patches a side by this (4 unless written)
    per_side = vision["image_size"] // vision["patch_size"] // int(
        m.get(CLIP.Projector.SCALE_FACTOR, 4))
    hidden = _text_hidden(model)
    # the tokens mlx-vlm's processor reads as the tokenizer's attributes (a Gemma 3
    # checkpoint's tokenizer_config names them; a GGUF's vocabulary only holds them)
    for name, token in GEMMA3_TOKENS.items():
        setattr(hf_tok, name, token)
        setattr(hf_tok, f"{name}_id", token_id(hf_tok, token, str(proj.path)))
    image_token = hf_tok.image_token_id
    text = _placeholder_text(hidden, "gemma3_text", mm_tokens_per_image=per_side * per_side)
    config = {"model_type": "gemma3", "hidden_size": hidden, "image_token_index": image_token,
              # mlx-vlm's merge zeroes the pad token's embeddings
              "pad_token_id": hf_tok.pad_token_id if hf_tok.pad_token_id is not None else 0,
              "text_config": gemma3.TextConfig.from_dict(text),
              "vision_config": gemma3.VisionConfig.from_dict(vision)}
    vlm = gemma3.Model(gemma3.ModelConfig.from_dict(config))
    lm = nn.Module()  # what mlx-vlm's merge reads of its language model: the embeddings
    lm.model = nn.Module()
    lm.model.embed_tokens = model.model.embed_tokens
    vlm.language_model = lm
    size = vision["image_size"]
    images = Gemma3ImageProcessorPil(size={"height": size, "width": size},
                                     image_mean=list(m[CLIP.IMAGE_MEAN]),
                                     image_std=list(m[CLIP.IMAGE_STD]), do_pan_and_scan=False)
    processor = Gemma3Processor(images, hf_tok, chat_template=hf_tok.chat_template,
                                image_seq_length=per_side * per_side)
    return vlm, image_token, processor


def _idefics3(proj: GgufFile, model: nn.Module, hf_tok: Any,
              smol: bool) -> tuple[nn.Module, int, Any]:
    import importlib

    from transformers import Idefics3ImageProcessorPil, SmolVLMImageProcessorPil

    family = "smolvlm" if smol else "idefics3"
    classes = importlib.import_module(f"mlx_vlm.models.{family}")
    processing = importlib.import_module(f"mlx_vlm.models.{family}.processing_{family}")
    m = proj.metadata
    vision = _vision_config(m, f"{family}_vision")
    scale = int(m.get(CLIP.Projector.SCALE_FACTOR, 2))
    hidden = _text_hidden(model)
    image_token = token_id(hf_tok, IDEFICS3_IMAGE, str(proj.path))
    text = _placeholder_text(hidden, "llama")
    config = {"model_type": family, "scale_factor": scale, "image_token_id": image_token,
              "text_config": classes.TextConfig.from_dict(text),
              "vision_config": classes.VisionConfig.from_dict(vision)}
    vlm = classes.Model(classes.ModelConfig.from_dict(config))
    lm = nn.Module()  # what mlx-vlm's merge reads of its language model: the embeddings
    lm.embed_tokens = model.model.embed_tokens
    vlm.language_model = lm
    side = vision["image_size"]
    longest = int(m.get(CLIP.PREPROC_IMAGE_SIZE, side))
    cls = SmolVLMImageProcessorPil if smol else Idefics3ImageProcessorPil
    # clip.cpp tiles an image larger than the tower's side, as the model's processor does
    images = cls(do_resize=True, size={"longest_edge": longest},
                 max_image_size={"longest_edge": side}, do_image_splitting=longest > side,
                 image_mean=list(m[CLIP.IMAGE_MEAN]), image_std=list(m[CLIP.IMAGE_STD]))
    tokens = (side // vision["patch_size"]) ** 2 // (scale * scale)
    processor_class = processing.SmolVLMProcessor if smol else processing.Idefics3Processor
    processor = processor_class(images, hf_tok, image_seq_len=tokens,
                                chat_template=hf_tok.chat_template)
    return vlm, image_token, processor


def _load_vision_weights(vlm: nn.Module, proj: GgufFile, family: str) -> None:
    """The mmproj's tensors as mlx-vlm's vision tower and projector weights, float32."""
    own = [(n, v) for n, v in tree_flatten(vlm.parameters())
           if not n.startswith("language_model.")]
    blocks = int(proj.metadata[CLIP.BLOCK_COUNT])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, blocks)
    weights, used = [], set()
    for name, value in own:
        # Hugging Face's name of the parameter (Idefics3 keeps its towers under model.;
        # Gemma 3's projection is a bare parameter the converter names .weight)
        hf = (name if family == "gemma3" else f"model.{name}").replace("_weight", ".weight")
        gguf_name, w = mapped_tensor(proj, names, hf, name, used)
        if name.endswith("patch_embedding.weight"):
            w = w.transpose(0, 2, 3, 1)  # torch's (out, in, kh, kw) -> mlx's (out, kh, kw, in)
        if "soft_emb_norm" in name:
            w = w - np.float32(1.0)  # the converter stored Gemma3RMSNorm's 1 + weight
        weights.append((name, shaped_as(proj, gguf_name, w, name, value)))
    install(vlm, weights, proj, used, family)


def mapped_tensor(proj: GgufFile, names: Any, hf: str, name: str,
                  used: set[str]) -> tuple[str, np.ndarray]:
    """The projector's tensor for the Hugging Face parameter name `hf` (mlx-vlm's `name`,
    for the message) by gguf-py's name map: its GGUF name and float32 values, marked
    `used`. A file without it is refused by name."""
    base, _, suffix = hf.rpartition(".")
    mapped = names.get_name(base)
    tensor = proj.tensors.get(f"{mapped}.{suffix}") if mapped else None
    if tensor is None:
        raise ModelLoadError(f"{proj.path}: the projector has no tensor for {name} "
                             f"({mapped or 'no GGUF name'}.{suffix})")
    used.add(tensor.name)
    return tensor.name, floats(tensor)


def shaped_as(proj: GgufFile, gguf_name: str, w: np.ndarray, name: str,
              value: mx.array) -> mx.array:
    """`w` as mlx-vlm's parameter `name`, refused by name where the shapes differ."""
    if tuple(w.shape) != tuple(value.shape):
        raise ModelLoadError(f"{proj.path}: tensor {gguf_name} is {tuple(w.shape)}, "
                             f"mlx-vlm's {name} is {tuple(value.shape)}")
    return mx.array(w)


def install(vlm: nn.Module, weights: list[tuple[str, mx.array]], proj: GgufFile,
            used: set[str], family: str) -> None:
    """Put a projector's mapped `weights` into `vlm`, once every tensor of the file was
    `used` (one left over means the file is not the family's layout: refused by name)."""
    extra = sorted(set(proj.tensors) - used)
    if extra:
        raise ModelLoadError(f"{proj.path}: unexpected tensor {extra[0]!r} for a "
                             f"{family} projector ({len(extra)} such)")
    vlm.update(tree_unflatten(weights))
    vlm.eval()
    mx.eval([w for _, w in weights])


def floats(tensor: Any) -> np.ndarray:
    """A tensor's values as float32 (quantized ones dequantized by gguf-py)."""
    if tensor.kind in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        return np.asarray(tensor.data, dtype=np.float32).reshape(tensor.shape)
    return gguf.quants.dequantize(np.asarray(tensor.data), tensor.kind).reshape(tensor.shape)


def load_gguf_with_vision(text: Path, mmproj: str | None, quantized: bool | None,
                          report: ProgressReporter, cpu: Any) -> dict[str, Any]:
    """A GGUF's LoadedModel fields, with the images of `mmproj` (refused with the reason
    when it does not pair) or, when none is given, of the mmproj*.gguf beside it: one
    that does not pair leaves the model reading text, with a note that says why."""
    from ..loader.gguf import load_gguf

    if mmproj is not None:
        return load_pair(text, mmproj_file(mmproj).resolve(), quantized, report, cpu)
    beside = mmproj_beside(text)
    if beside is None:
        return load_gguf(text, quantized, report, cpu)
    try:
        proj = read_projector(beside, report)
    except ModelLoadError as e:
        return _text_only(load_gguf(text, quantized, report, cpu), e)
    fields = load_gguf(text, quantized, report, cpu)
    try:
        return with_vision(fields, text, proj)
    except ModelLoadError as e:
        return _text_only(fields, e)


def _text_only(fields: dict[str, Any], why: ModelLoadError) -> dict[str, Any]:
    return {**fields, "notes": (*fields.get("notes", ()), f"it reads text only here: {why}")}
