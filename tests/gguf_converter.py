"""A tiny case of tests/gguf_models.py saved as a Hugging Face checkpoint and converted by
llama.cpp's own ``convert_hf_to_gguf.py``: what tests/engine/test_gguf_converter_parity.py
holds the tiny writer to, and what bench/arch_parity.py runs llama.cpp's inference on.

It needs a llama.cpp source tree (the llama-cpp-python sdist's vendor/llama.cpp) and a
Python with torch and transformers (the converter's); CI has neither.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn

from engine.loader.gguf_file import read_gguf_file
from engine.loader.gguf_tokenizer import build_gguf_tokenizer
from tests.gguf_models import ArchCase, hf_parameters, write_gguf

HF_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
              "qwen3": "Qwen3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
              "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
              "phi3": "Phi3ForCausalLM", "granite": "GraniteForCausalLM",
              "olmo2": "Olmo2ForCausalLM", "smollm3": "SmolLM3ForCausalLM",
              "ministral3": "Ministral3ForCausalLM", "gemma4_text": "Gemma4ForCausalLM",
              "qwen3_5": "Qwen3_5ForCausalLM", "qwen3_5_moe": "Qwen3_5MoeForCausalLM",
              "lfm2": "Lfm2ForCausalLM", "mistral": "Mistral3ForConditionalGeneration"}
# The converter hashes a tokenizer's output to name its pre-tokenizer; the tiny one is
# unknown to it, so the run names it as the tiny writer does, and writes it as the BPE
# vocabulary it is (the tokenizer is not what the converter tests are about).
RUN = """
import sys
sys.path.insert(0, {tree!r})
import convert_hf_to_gguf as cv
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "smollm"
found = cv.get_model_class
def with_bpe_vocab(*args, **kwargs):  # Gemma's converter wants a SentencePiece model
    cls = found(*args, **kwargs)
    cls.set_vocab = base.TextModel._set_vocab_gpt2
    return cls
cv.get_model_class = with_bpe_vocab
sys.argv = ["convert_hf_to_gguf.py", {src!r}, "--outtype", "f32", "--outfile", {out!r}{more}]
cv.main()
"""


def converts(case: ArchCase) -> bool:
    """Whether the case's config names a Hugging Face class the converter is run on here
    (gpt-oss's checkpoint format is not built for it)."""
    return case.config["model_type"] in HF_CLASSES


def _hf_weights(model: nn.Module) -> dict[str, mx.array]:
    out = {}
    for name, value in hf_parameters(model).items():  # Gemma 4's experts stacked, fused
        if ".switch_mlp." in name:  # Qwen3-MoE's HF checkpoint keeps one tensor an expert
            for e in range(value.shape[0]):
                out[name.replace(".switch_mlp.", f".experts.{e}.")] = mx.array(value[e])
        else:
            out[name] = mx.array(value)
    return out


def save_hf(case: ArchCase, model: nn.Module, dest: Path, tmp: Path) -> None:
    """The model as a Hugging Face checkpoint of its class (config.json, safetensors, the
    tiny tokenizer), a VLM's text config nested as its checkpoint nests it."""
    dest.mkdir()
    config = dict(case.config, architectures=[HF_CLASSES[case.config["model_type"]]],
                  torch_dtype="float32", bos_token_id=1, eos_token_id=2)
    if config["model_type"] == "gemma3_text":
        config["rope_scaling"] = {"rope_type": "linear", "factor": 8.0}
    if case.gguf_arch == "qwen2vl":  # Qwen2-VL's checkpoint (its vision tower left out)
        config.update(model_type="qwen2_vl", architectures=["Qwen2VLForConditionalGeneration"])
    if case.gguf_arch == "mistral3" and config["model_type"] == "mistral":
        del config["architectures"]  # Mistral Small 3.1's checkpoint (its tower left out)
        config = {"model_type": "mistral3", "torch_dtype": "float32",
                  "architectures": ["Mistral3ForConditionalGeneration"], "bos_token_id": 1,
                  "eos_token_id": 2, "text_config": config,
                  "vision_config": {"model_type": "pixtral", "hidden_size": 32}}
    if case.gguf_arch == "qwen3vl":  # Qwen3-VL's checkpoint: its text config nested
        rope = {"rope_type": "default", "mrope_interleaved": True,
                "mrope_section": config.pop("rope_scaling")["mrope_section"]}
        del config["architectures"]  # the text config's own would name Qwen3's class
        config = {"model_type": "qwen3_vl", "architectures": ["Qwen3VLForConditionalGeneration"],
                  "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
                  "text_config": dict(config, model_type="qwen3_vl_text", rope_scaling=rope),
                  "vision_config": {"deepstack_visual_indexes": list(range(
                      config.pop("num_deepstack_layers")))}}
    if config["model_type"] in ("qwen3_5", "qwen3_5_moe"):  # the *ForCausalLM text config
        config["model_type"] += "_text"
        rope = dict(config["rope_parameters"])
        rope["rope_type"] = rope.pop("type")
        config["rope_parameters"] = rope
    (dest / "config.json").write_text(json.dumps(config))
    mx.save_safetensors(str(dest / "model.safetensors"), _hf_weights(model),
                        metadata={"format": "pt"})
    probe = write_gguf(tmp / "probe.gguf", case, {})
    tok = build_gguf_tokenizer(read_gguf_file(probe).metadata, "probe")
    tok.save_pretrained(str(dest))


def convert(case: ArchCase, model: nn.Module, work: Path, *, tree: str, python: str,
            timeout: float = 300) -> Path:
    """The model saved as its checkpoint under `work` and converted (F32) by llama.cpp's
    converter from `tree`, run by `python`; the converter's file. Raises RuntimeError with
    the converter's last output lines when it fails."""
    save_hf(case, model, work / "hf", work)
    out = work / "converted.gguf"
    # Qwen 3.5's converter wants MTP layers unless told there are none (the tiny model
    # has none; the loader's leaving out of a file's MTP blocks is tested apart)
    more = ', "--no-mtp"' if case.gguf_arch.startswith("qwen35") else ""
    run = subprocess.run([python, "-c", RUN.format(tree=tree, src=str(work / "hf"),
                                                   out=str(out), more=more)],
                         capture_output=True, text=True, timeout=timeout)
    if run.returncode != 0:
        raise RuntimeError(f"llama.cpp's converter failed:\n{run.stderr[-3000:]}")
    return out
