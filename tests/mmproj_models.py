"""Tiny GGUF + mmproj pairs (issue #52): a tiny random VLM (tests/vision_models.py) written
as llama.cpp's convert_hf_to_gguf.py writes a VLM: its language model as a text GGUF and
its vision tower and projector as an mmproj GGUF (`--mmproj`), so a test compares the pair
with the very same weights loaded as an mlx-vlm folder.

The text GGUF goes through tests/gguf_models.py's writer (gguf-py's names, q/k rows
permuted for llama, Gemma's norms plus one) with the VLM's own vocabulary. The mmproj's
names are gguf-py's MMPROJ map of Hugging Face's names, its layout the converter's
(conversion/base.py MmprojModel, gemma.py Gemma3VisionModel, smolvlm.py SmolVLMModel,
qwenvl.py Qwen2VLVisionModel, qwen3vl.py Qwen3VLVisionModel, llava.py LlavaVisionModel,
lfm2.py LFM2VLModel, gemma.py Gemma4VisionAudioModel): the
patch embedding as torch's (out, in, kh, kw), Gemma 3's soft embedding norm plus one, its
input projection float16, the tower's and connector's matrices as `--outtype` says (f32,
f16, q8_0), norms, biases and embeddings float32.
tests/engine/test_mmproj_converter_parity.py holds this writer to llama.cpp's converter.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import gguf
import mlx.core as mx
import numpy as np
from filelock import FileLock
from gguf import GGMLQuantizationType, GGUFWriter

from tests import session_files
from tests.gguf_models import (
    CASES,
    ArchCase,
    _permute,
    gguf_tensors,
    lfm2_meta,
    lfm2_tensor,
    quantize,
    qwen2vl_meta,
    qwen3vl_meta,
    write_gguf,
)
from tests.vision_models import make_tiny_vlm

# llama.cpp's projector type of each family (conversion/gemma.py, smolvlm.py, qwenvl.py)
PROJECTOR = {"gemma3": "gemma3", "idefics3": "idefics3", "smolvlm": "idefics3",
             "qwen2_vl": "qwen2vl_merger", "qwen2_5_vl": "qwen2.5vl_merger",
             "qwen3_vl": "qwen3vl_merger", "mistral3": "pixtral", "pixtral": "pixtral",
             "lfm2_vl": "lfm2", "gemma4": "gemma4v"}
QWEN = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
# LlavaVisionModel's pixtral towers: Mistral Small 3.1's (a patch merger), Pixtral 12B's
PIXTRAL = ("mistral3", "pixtral")
# Qwen-VL's processor mean and std (preprocessor_config.json of the Qwen checkpoints)
QWEN_MEAN, QWEN_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]


def make_tiny_pair(folder: Path, family: str, seed: int = 0) -> tuple[Path, Path, Path]:
    """A tiny `family` VLM as an mlx-vlm folder `folder / family` and as a GGUF + mmproj
    pair in `folder / (family + "-gguf")`: (the VLM folder, the text GGUF, the mmproj).

    Made once a test session for each family and seed (the same seeded weights every time:
    ~0.5-2 CPU-s a pair, and the tests ask for the same pairs again and again), kept under
    the session's folder (tests/session_files.py) and copied for each caller, who may change
    its copy; outside pytest, made in place."""
    names = (family, f"{family}-gguf")
    if session_files.folder is None:
        _make_tiny_pair(folder, family, seed)
    else:
        kept = session_files.folder / f"tiny-pair-{family}-{seed}"
        session_files.folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(kept) + ".lock"):  # one worker makes it, another waits for it
            if not kept.exists():
                part = kept.with_name(kept.name + f".{os.getpid()}.part")
                shutil.rmtree(part, ignore_errors=True)
                _make_tiny_pair(part, family, seed)
                part.replace(kept)  # whole or absent
        for name in names:  # fresh files, as if just written
            shutil.copytree(kept / name, folder / name, dirs_exist_ok=True,
                            copy_function=shutil.copyfile)
    out = folder / names[1]
    return folder / family, out / f"tiny-{family}.F32.gguf", \
        out / f"mmproj-tiny-{family}-f32.gguf"


def _make_tiny_pair(folder: Path, family: str, seed: int) -> None:
    # Gemma 3: six layers, as llama.cpp fixes every sixth layer global (below)
    # Qwen-VL: four tower layers, as the converter's name map has the merger's second
    # matrix (mm.2) only for a tower of three or more blocks
    # (Mistral 3 and LFM2-VL likewise: mm.2, their projectors' second matrix)
    vlm = make_tiny_vlm(folder / family, family, seed, layers=6 if family == "gemma3" else 2,
                        vision_layers=4 if family in (*QWEN, *PIXTRAL, "lfm2_vl") else
                        2 if family == "gemma4" else 1)
    if family == "gemma3":
        _as_llama_cpp_gemma3(vlm)
    if family in QWEN:
        _as_llama_cpp_qwen(vlm)
    if family == "lfm2_vl":
        _as_llama_cpp_lfm2(vlm, seed)
    if family == "gemma4":
        _as_llama_cpp_gemma4(vlm, seed)
    out = folder / f"{family}-gguf"
    out.mkdir(parents=True, exist_ok=True)
    write_text_gguf(vlm, out / f"tiny-{family}.F32.gguf")
    write_mmproj(vlm, out / f"mmproj-tiny-{family}-f32.gguf")


def _as_llama_cpp_gemma3(vlm: Path) -> None:
    """What a GGUF of Gemma 3 can hold: the sliding pattern llama.cpp fixes (every sixth
    layer global: src/models/gemma3.cpp), and the input projection the converter always
    writes as float16 (Gemma3VisionModel.tensor_force_quant), rounded so in the folder."""
    config = json.loads((vlm / "config.json").read_text())
    config["text_config"]["sliding_window_pattern"] = 6
    (vlm / "config.json").write_text(json.dumps(config, indent=1))
    weights = mx.load(str(vlm / "model.safetensors"))
    key = "multi_modal_projector.mm_input_projection_weight"
    weights[key] = weights[key].astype(mx.float16).astype(mx.float32)
    mx.save_safetensors(str(vlm / "model.safetensors"), weights)


def _as_llama_cpp_qwen(vlm: Path) -> None:
    """What an mmproj of Qwen-VL implies: clip.cpp's 8 to 4096 image tokens an image (the
    processor's min and max pixels; the file holds neither), the checkpoints' mean and std
    (the converter writes them), Qwen2.5-VL's 112-pixel windows (clip.cpp's; the file has
    only the period of the full-attention layers)."""
    config = json.loads((vlm / "config.json").read_text())
    if "fullatt_block_indexes" in config["vision_config"]:  # Qwen2.5-VL
        # window attention every other layer, in clip.cpp's 112-pixel windows
        config["vision_config"].update(fullatt_block_indexes=[1, 3], window_size=112)
        (vlm / "config.json").write_text(json.dumps(config, indent=1))
    pre = json.loads((vlm / "preprocessor_config.json").read_text())
    unit = pre["patch_size"] * pre["merge_size"]
    least, most = 8 * unit * unit, 4096 * unit * unit
    pre.update(min_pixels=least, max_pixels=most, image_mean=QWEN_MEAN, image_std=QWEN_STD)
    if config["model_type"] == "qwen3_vl":  # its processor's limits, and Qwen3-VL's mean/std
        pre.update(size={"shortest_edge": least, "longest_edge": most},
                   image_mean=[0.5] * 3, image_std=[0.5] * 3)
    (vlm / "preprocessor_config.json").write_text(json.dumps(pre))


def _as_llama_cpp_lfm2(vlm: Path, seed: int) -> None:
    """What an LFM2-VL mmproj implies: 16-pixel patches (conversion/lfm2.py views the patch
    embedding as 16 x 16 x 3) and a 16 x 16 position table (the checkpoints'), clip.cpp's 64
    to 256 image tokens an image and the checkpoints' 512-pixel tiles (a context that holds
    a tiled image); the two tensors whose shapes change drawn anew."""
    config = json.loads((vlm / "config.json").read_text())
    patch, side = 16, 16
    config["vision_config"].update(patch_size=patch, num_patches=side * side,
                                   image_size=side * patch)
    limits = {"encoder_patch_size": patch, "min_image_tokens": 64, "max_image_tokens": 256,
              "tile_size": 512, "do_image_splitting": True, "max_num_patches": 1024}
    config.update(limits)
    # room for a tiled image (tiles of 256 tokens and a thumbnail: ~1,300 tokens)
    config["text_config"]["max_position_embeddings"] = 2048
    (vlm / "config.json").write_text(json.dumps(config, indent=1))
    pre = json.loads((vlm / "preprocessor_config.json").read_text())
    pre.update(limits, patch_size=patch, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    (vlm / "preprocessor_config.json").write_text(json.dumps(pre))
    weights = mx.load(str(vlm / "model.safetensors"))
    mx.random.seed(seed)
    width = config["vision_config"]["hidden_size"]
    weights["vision_tower.embeddings.patch_embedding.weight"] = mx.random.normal(
        (width, patch * patch * 3)) * 0.05
    weights["vision_tower.embeddings.position_embedding.weight"] = mx.random.normal(
        (side * side, width)) * 0.05
    mx.save_safetensors(str(vlm / "model.safetensors"), weights)


def _as_llama_cpp_gemma4(vlm: Path, seed: int) -> None:
    """What a gemma4v mmproj implies (clip.cpp): 3 x 3 pooling, the checkpoints' 280-token
    image budget (the file holds neither), mean 0 and std 1 (Gemma 4's processor: the
    converter writes them), image tokens that attend both ways (clip.cpp: a text model not
    1536 or 2560 wide), a context that holds two images of ~260 tokens; and, to map them
    all, the encoder's optional parts: clipped linears (finite bounds drawn) and the
    standardizing bias and scale."""
    from engine.vision.mmproj_gemma4 import POOLING, SOFT_TOKENS

    config = json.loads((vlm / "config.json").read_text())
    config["vision_config"].update(pooling_kernel_size=POOLING, default_output_length=SOFT_TOKENS,
                                   use_clipped_linears=True, standardize=True)
    config["text_config"].update(use_bidirectional_attention="vision",
                                 max_position_embeddings=2048)
    config["vision_soft_tokens_per_image"] = SOFT_TOKENS
    (vlm / "config.json").write_text(json.dumps(config, indent=1))
    processor = json.loads((vlm / "processor_config.json").read_text())
    processor["image_processor"].update(pooling_kernel_size=POOLING, max_soft_tokens=SOFT_TOKENS,
                                        image_mean=[0.0] * 3, image_std=[1.0] * 3)
    (vlm / "processor_config.json").write_text(json.dumps(processor))
    weights = mx.load(str(vlm / "model.safetensors"))
    mx.random.seed(seed)
    width = config["vision_config"]["hidden_size"]
    for name in [n for n in weights if n.startswith("vision_tower.encoder.")
                 and n.endswith(".linear.weight")]:
        base = name.removesuffix(".linear.weight")
        low, high = (mx.random.uniform(0.5, 3.0, (2,)) * mx.array([-1.0, 1.0])).tolist()
        weights.update({f"{base}.input_min": mx.array(low), f"{base}.input_max": mx.array(high),
                        f"{base}.output_min": mx.array(low * 2),
                        f"{base}.output_max": mx.array(high * 2)})
    weights["vision_tower.std_bias"] = mx.random.normal((width,)) * 0.5
    weights["vision_tower.std_scale"] = 1.0 + mx.random.normal((width,)) * 0.1
    mx.save_safetensors(str(vlm / "model.safetensors"), weights)


def text_case(vlm: Path) -> ArchCase:
    """The ArchCase (tests/gguf_models.py) of the VLM's language model."""
    config = json.loads((vlm / "config.json").read_text())
    if config["model_type"] == "qwen3_vl":  # conversion/qwen3vl.py Qwen3VLTextModel
        text = config["text_config"]
        deepstack = len(config["vision_config"]["deepstack_visual_indexes"])
        return ArchCase("qwen3vl", dict(
            text, model_type="qwen3", num_deepstack_layers=deepstack,
            rope_scaling={"type": "mrope", "mrope_section": text["rope_scaling"]["mrope_section"]}),
            metadata=qwen3vl_meta)
    if config["model_type"] == "lfm2-vl":  # conversion/lfm2.py LFM2Model
        text = config["text_config"]
        return ArchCase("lfm2", dict(text, rms_norm_eps=text["norm_eps"],
                                     intermediate_size=text["block_ff_dim"]),
                        metadata=lfm2_meta, transform=lfm2_tensor)
    if config["model_type"] == "gemma4":  # conversion/gemma.py Gemma4Model (tied head)
        text = dict(config["text_config"])
        full = text["rope_parameters"]["full_attention"]  # its unrotated dimensions 1e30
        half = text["global_head_dim"] // 2
        rotated = int(text["global_head_dim"] * full["partial_rotary_factor"] / 2)
        freqs = np.array([1.0] * rotated + [1e30] * (half - rotated), dtype=np.float32)
        text["rope_theta"] = full["rope_theta"]  # (the writer's; Gemma 4's own follow)
        return ArchCase("gemma4", text, metadata=CASES["gemma4"].metadata,
                        extra={"rope_freqs.weight": freqs}, renames=CASES["gemma4"].renames)
    if config["model_type"] in QWEN:  # flat: the text model's keys at the top
        text = {k: v for k, v in config.items() if not isinstance(v, dict) or k == "rope_scaling"}
        return ArchCase("qwen2vl", dict(text, model_type="qwen2"), metadata=qwen2vl_meta)
    text = dict(config["text_config"], tie_word_embeddings=False)
    text["vocab_size"] = config.get("vocab_size", text.get("vocab_size"))
    if config["model_type"] == "gemma3":
        return ArchCase("gemma3", text, norm_shift=1.0, metadata=CASES["gemma3"].metadata)
    if config["model_type"] == "mistral3":  # conversion/mistral3.py Ministral3Model: llama's
        return ArchCase("mistral3", text, permute_qk=True, metadata=CASES["llama"].metadata)
    return ArchCase("llama", text, permute_qk=True, metadata=CASES["llama"].metadata)


def write_text_gguf(vlm: Path, path: Path,
                    kind: GGMLQuantizationType | None = None) -> Path:
    """The VLM's language model as a text GGUF with the VLM's vocabulary and template
    (`kind`: its matrices random blocks of that quantized type, tests/gguf_models.py)."""
    from mlx_vlm.utils import load

    from engine.vision.load import text_model

    config = json.loads((vlm / "config.json").read_text())
    model, processor = load(str(vlm))
    lm = text_model(model, config, str(vlm))  # mlx-lm's class on the VLM's arrays
    case = text_case(vlm)
    tensors, raw = gguf_tensors(case, lm), {}
    if kind is not None:
        tensors, raw = quantize(tensors, kind)
    return write_gguf(path, case, tensors, raw_types=raw, name=f"tiny {config['model_type']}",
                      vocabulary=lambda w: _vocabulary(w, processor.tokenizer, config))


def _vocabulary(w: GGUFWriter, tok: Any, config: dict[str, Any]) -> None:
    """The VLM's byte-level vocabulary as a GGUF's (no merges: every byte a token), its
    added tokens control tokens, as the converter's _set_vocab_gpt2 writes them."""
    added = set(tok.get_added_vocab())
    tokens = tok.convert_ids_to_tokens(list(range(len(tok))))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in added else 1 for t in tokens])
    w.add_token_merges([])
    w.add_bos_token_id(tok.bos_token_id)
    eos = config["eos_token_id"]  # a list, or (LFM2-VL) one id
    w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)
    w.add_pad_token_id(tok.pad_token_id)
    w.add_add_bos_token(False)
    w.add_chat_template(tok.chat_template)


def hf_vision_weights(vlm: Path) -> dict[str, np.ndarray]:
    """The folder's vision tower and projector under Hugging Face's names and layouts (as
    the VLM's checkpoint on the hub holds them)."""
    config = json.loads((vlm / "config.json").read_text())
    out = {}
    for name, value in mx.load(str(vlm / "model.safetensors")).items():
        if name.startswith("language_model."):
            continue
        w = np.array(value)
        if config["model_type"] in PIXTRAL:  # Mistral3 / LlavaForConditionalGeneration's
            name = name.replace("vision_tower.vision_model.", "vision_tower.", 1)
        if config["model_type"] == "lfm2-vl":  # Lfm2VlForConditionalGeneration's (its patch
            out[name.replace("vision_tower.", "vision_tower.vision_model.", 1)] = w  # a Linear)
            continue
        if name.endswith(("patch_embedding.weight", "patch_conv.weight")):
            w = w.transpose(0, 3, 1, 2)  # mlx's (out, kh, kw, in) -> torch's (out, in, kh, kw)
        if config["model_type"] in QWEN:  # Qwen2_5_VLForConditionalGeneration's visual.
            if name.endswith("patch_embed.proj.weight"):  # Conv3D: (out, in, t, kh, kw)
                w = w.transpose(0, 4, 1, 2, 3)
            out[name.replace("vision_tower.", "visual.", 1)] = w
            continue
        if config["model_type"] not in ("gemma3", *PIXTRAL):
            name = "model." + name  # Idefics3ForConditionalGeneration's model.vision_model
        out[name] = w
    return out


# --outtype: the file type, and the GGML type of the tower's and connector's matrices
OUTTYPES = {"f32": (gguf.LlamaFileType.ALL_F32, GGMLQuantizationType.F32),
            "f16": (gguf.LlamaFileType.MOSTLY_F16, GGMLQuantizationType.F16),
            "q8_0": (gguf.LlamaFileType.MOSTLY_Q8_0, GGMLQuantizationType.Q8_0)}


@functools.cache
def _name_map(arch: gguf.MODEL_ARCH, blocks: int) -> gguf.TensorNameMap:
    """gguf-py's name map, built once a process (only read: ~1 CPU-s to build for 128
    blocks, and the Gemma 4 tests write several mmproj files each)."""
    return gguf.get_tensor_name_map(arch, blocks)


def mmproj_tensors(vlm: Path, outtype: str = "f32") -> dict[str, np.ndarray]:
    """The mmproj's tensors, by GGUF name, as the converter leaves them (a Q8_0 tensor as
    its raw blocks, uint8: write_mmproj tells them by their dtype)."""
    config = json.loads((vlm / "config.json").read_text())
    if config["model_type"] == "gemma4":
        return _gemma4_tensors(vlm, config, outtype)
    blocks = config["vision_config"].get("num_hidden_layers") or config["vision_config"]["depth"]
    name_map = _name_map(gguf.MODEL_ARCH.MMPROJ, blocks)
    out = {}
    heads = config["vision_config"].get("num_attention_heads")
    for hf, w in _split_qwen(hf_vision_weights(vlm), config).items():
        if hf.endswith(".patch_embd.weight") or hf.endswith(".patch_embd.weight.1"):
            # Qwen2VLVisionModel's Conv2D slices: F16 at --outtype f16, else F32
            out[hf] = w.astype(np.float16 if outtype == "f16" else np.float32)
            continue
        hf = hf.replace("_weight", ".weight")  # Gemma3VisionModel.filter_tensors
        base, _, suffix = hf.rpartition(".")
        # Qwen3VLVisionModel's own renames are GGUF names already
        new = base if base.startswith(("v.", "mm.")) else name_map.get_name(base)
        assert new is not None, f"gguf-py has no MMPROJ name for {hf}"
        if "soft_emb_norm" in hf:
            w = w + np.float32(1.0)  # Gemma3VisionModel.modify_tensors
        if config["model_type"] in PIXTRAL and base.endswith(("q_proj", "k_proj")):
            w = _permute(w, heads)  # LlavaVisionModel.modify_tensors (LlamaModel.permute)
        if config["model_type"] == "lfm2-vl" and new == "v.patch_embd" and suffix == "weight":
            p = config["vision_config"]["patch_size"]  # LFM2VLModel.modify_tensors' view
            w = w.reshape(w.shape[0], p, p, 3).transpose(0, 3, 1, 2)
        if "input_projection" in hf:
            w = w.astype(np.float16)  # whatever the outtype (tensor_force_quant)
        elif config["model_type"] in (*PIXTRAL, "lfm2-vl") \
                and new in ("v.patch_embd", "mm.patch_merger") and suffix == "weight":
            # MmprojModel.tensor_force_quant: F16 at --outtype f16, else F32
            w = w.astype(np.float16 if outtype == "f16" else np.float32)
        elif w.ndim == 2 and ".embeddings." not in hf and new != "v.position_embd":
            # the rest: 1-D and position tables F32 (base.py prepare_tensors)
            w = gguf.quants.quantize(w, OUTTYPES[outtype][1]) if outtype == "q8_0" \
                else w.astype(np.float16 if outtype == "f16" else np.float32)
        out[f"{new}.{suffix}"] = w
    return out


def _gemma4_tensors(vlm: Path, config: dict[str, Any], outtype: str) -> dict[str, np.ndarray]:
    """conversion/gemma.py Gemma4VisionAudioModel.modify_tensors: the encoder's layers
    renamed (`vision_model.model.`, `.linear.` dropped), the patch embedding's Linear viewed
    as a convolution (out, channel, row, column), scalars as 1-element tensors; mapped with
    the suffixes it names. Types: the position table F32 (tensor_force_quant), the patch
    embedding F16 at --outtype f16 else F32, 1-D F32, the other matrices as --outtype says."""
    name_map = _name_map(gguf.MODEL_ARCH.MMPROJ, 128)  # (vision + audio: 128)
    patch = config["vision_config"]["patch_size"]
    out = {}
    for hf, w in hf_vision_weights(vlm).items():
        hf = hf.replace("model.vision_tower.encoder.", "vision_model.model.")
        hf = hf.replace(".linear.weight", ".weight")
        if hf.endswith("position_embedding_table"):
            hf += ".weight"
        if hf.endswith("patch_embedder.input_proj.weight"):
            w = w.reshape(w.shape[0], patch, patch, 3).transpose(0, 3, 1, 2)
        w = w.reshape(1) if w.ndim == 0 else w
        new = name_map.get_name(hf, try_suffixes=(".weight", ".bias", ".input_max", ".input_min",
                                                  ".output_max", ".output_min"))
        assert new is not None, f"gguf-py has no MMPROJ name for {hf}"
        if new == "v.position_embd.weight" or w.ndim == 1:
            w = w.astype(np.float32)
        elif new == "v.patch_embd.weight":
            w = w.astype(np.float16 if outtype == "f16" else np.float32)
        else:
            w = gguf.quants.quantize(w, OUTTYPES[outtype][1]) if outtype == "q8_0" \
                else w.astype(np.float16 if outtype == "f16" else np.float32)
        out[new] = w
    return out


def _split_qwen(weights: dict[str, np.ndarray],
                config: dict[str, Any]) -> dict[str, np.ndarray]:
    """conversion/qwenvl.py Qwen2VLVisionModel.modify_tensors: the fused qkv as q, k, v;
    the Conv3D patch embedding as its two temporal slices, named as the GGUF's already.
    Qwen3VLVisionModel: qkv kept; the merger as v.post_ln, mm.0, mm.2; the DeepStack mergers
    as v.deepstack.{the tower layer each reads}.norm / fc1 / fc2."""
    qwen3 = config["model_type"] == "qwen3_vl"
    levels = config["vision_config"].get("deepstack_visual_indexes", [])
    merger = {"norm": "v.post_ln", "linear_fc1": "mm.0", "linear_fc2": "mm.2"}
    deepstack = {"norm": "norm", "linear_fc1": "fc1", "linear_fc2": "fc2"}
    out = {}
    for hf, w in weights.items():
        parts = hf.split(".")
        if qwen3 and parts[1] == "merger":
            out[f"{merger[parts[2]]}.{parts[3]}"] = w
        elif qwen3 and parts[1] == "deepstack_merger_list":
            out[f"v.deepstack.{levels[int(parts[2])]}.{deepstack[parts[3]]}.{parts[4]}"] = w
        elif ".attn.qkv." in hf and not qwen3:
            for part, rows in zip("qkv", np.split(w, 3), strict=True):
                out[hf.replace(".qkv.", f".{part}.")] = rows
        elif hf.endswith("patch_embed.proj.weight"):
            out["v.patch_embd.weight"], out["v.patch_embd.weight.1"] = w[:, :, 0], w[:, :, 1]
        else:
            out[hf] = w
    return out


def write_mmproj(vlm: Path, path: Path, *, projector: str | None = None,
                 tensors: dict[str, np.ndarray] | None = None, outtype: str = "f32") -> Path:
    """The VLM's mmproj GGUF (`projector`: another projector type to write, for refusals;
    `tensors`: other tensors; `outtype`: the converter's --outtype, f32, f16 or q8_0)."""
    config = json.loads((vlm / "config.json").read_text())
    family = config["model_type"]
    v = config["vision_config"]
    processor = json.loads((vlm / "processor_config.json").read_text())
    # (Gemma 4's image processor settings are in processor_config.json, as the converter
    # reads them when there is no preprocessor_config.json)
    pre = (processor["image_processor"] if family == "gemma4"
           else json.loads((vlm / "preprocessor_config.json").read_text()))
    w = GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MMPROJ])
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_name(f"tiny {family}")
    w.add_file_type(OUTTYPES[outtype][0])
    w.add_clip_has_vision_encoder(True)
    if family in QWEN:  # Qwen2VLVisionModel.__init__'s renames (Qwen2-VL: FFN = out width)
        # (Qwen3VLVisionModel: the side from the position table, its square's side in patches)
        side = (int(v["num_position_embeddings"] ** 0.5) * v["patch_size"]
                if family == "qwen3_vl" else 560)
        v = {**v, "image_size": v.get("image_size", side), "num_attention_heads": v["num_heads"],
             "num_hidden_layers": v["depth"]}
        if "embed_dim" in v:
            v.update(intermediate_size=v["hidden_size"], hidden_size=v["embed_dim"])
    text_width = (config["hidden_size"] if family in QWEN and family != "qwen3_vl"
                  else config["text_config"]["hidden_size"])
    if family == "gemma4":  # "unused, but set to avoid error" (Gemma4VisionAudioModel)
        v = {**v, "image_size": 224}
    w.add_vision_projection_dim(text_width)
    w.add_vision_image_size(v["image_size"])
    w.add_vision_patch_size(v["patch_size"])
    w.add_vision_embedding_length(v["hidden_size"])
    w.add_vision_feed_forward_length(v["intermediate_size"])
    w.add_vision_block_count(v["num_hidden_layers"])
    w.add_vision_head_count(v["num_attention_heads"])
    w.add_vision_image_mean(list(pre["image_mean"]))
    w.add_vision_image_std(list(pre["image_std"]))
    if family == "gemma4":  # Gemma4VisionAudioModel: the vision projector's own key
        w.add_clip_vision_projector_type(projector or PROJECTOR[family])
    else:
        w.add_clip_projector_type(projector or PROJECTOR[family.replace("-", "_")])
    if family == "gemma4":  # Gemma4VisionAudioModel.set_gguf_parameters
        w.add_vision_attention_layernorm_eps(v.get("layer_norm_eps", 1e-6))
    elif family == "gemma3":
        w.add_vision_attention_layernorm_eps(v.get("layer_norm_eps", 1e-6))
        w.add_vision_use_gelu(True)
        per_side = int(processor.get("image_seq_length", 256) ** 0.5)
        scale = (v["image_size"] // v["patch_size"]) // per_side
        if scale > 0 and scale != 4:  # the converter writes it only when not the default
            w.add_vision_projector_scale_factor(scale)
    elif family == "qwen3_vl":  # conversion/qwen3vl.py Qwen3VLVisionModel.set_gguf_parameters
        w.add_vision_use_gelu(True)
        w.add_vision_spatial_merge_size(v["spatial_merge_size"])
        w.add_vision_attention_layernorm_eps(config["text_config"].get("rms_norm_eps", 1e-6))
        w.add_vision_is_deepstack_layers([i in v["deepstack_visual_indexes"]
                                          for i in range(v["depth"])])
    elif family in QWEN:  # conversion/qwenvl.py Qwen2VLVisionModel.set_gguf_parameters
        if family == "qwen2_5_vl":
            w.add_vision_use_silu(True)
            w.add_vision_n_wa_pattern(v["fullatt_block_indexes"][0] + 1)
        w.add_vision_attention_layernorm_eps(config.get("rms_norm_eps", 1e-6))
    elif family == "lfm2-vl":  # LFM2VLModel.set_gguf_parameters
        w.add_vision_attention_layernorm_eps(v.get("layer_norm_eps", 1e-6))
        w.add_vision_projector_scale_factor(config.get("downsample_factor", 2))
        w.add_vision_use_gelu(True)
    elif family in PIXTRAL:  # LlavaVisionModel.set_gguf_parameters (a pixtral tower)
        w.add_vision_attention_layernorm_eps(v.get("layer_norm_eps", 1e-5))
        w.add_vision_use_silu(True)  # Mistral Small 3.1's and Pixtral 12B's hidden_act
        if "spatial_merge_size" in config:  # (Pixtral 12B's config has none)
            w.add_vision_spatial_merge_size(config["spatial_merge_size"])
    else:
        w.add_vision_attention_layernorm_eps(v.get("layer_norm_eps", 1e-5))
        w.add_vision_projector_scale_factor(config.get("scale_factor", 2))
        w.add_vision_use_gelu(True)
        w.add_vision_preproc_image_size(pre.get("size", {}).get("longest_edge",
                                                                v["image_size"]))
    for name, value in (mmproj_tensors(vlm, outtype) if tensors is None else tensors).items():
        raw = GGMLQuantizationType.Q8_0 if value.dtype == np.uint8 else None
        w.add_tensor(name, np.ascontiguousarray(value), raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
