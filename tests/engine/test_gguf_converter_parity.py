"""The tiny GGUF writer of tests/gguf_models.py held to llama.cpp's own converter.

For each architecture, the same random weights are saved as a Hugging Face checkpoint and
converted by llama.cpp's ``convert_hf_to_gguf.py`` (F32): the loader must build the same
config from both files, and the converter's file must give mlx-lm's logits. This needs a
llama.cpp source tree and a Python with torch (the converter's), so it runs only when
BATCHCHAT_LLAMA_CPP (the tree: the llama-cpp-python sdist's vendor/llama.cpp) and
BATCHCHAT_CONVERTER_PYTHON (that Python) are set; CI has neither. Run on 2026-11-29 with
llama-cpp-python 0.3.36's tree and torch 2.13.0: docs/loader.md.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from engine.loader import load_model
from engine.loader.gguf_arch import architecture, hf_config
from engine.loader.gguf_file import read_gguf_file
from engine.loader.gguf_tokenizer import build_gguf_tokenizer
from tests.gguf_models import CASES, build_model, gguf_tensors, hf_parameters, write_gguf

LLAMA_CPP = os.environ.get("BATCHCHAT_LLAMA_CPP")
PYTHON = os.environ.get("BATCHCHAT_CONVERTER_PYTHON")
pytestmark = pytest.mark.skipif(
    not (LLAMA_CPP and PYTHON),
    reason="needs BATCHCHAT_LLAMA_CPP (llama.cpp's tree) and BATCHCHAT_CONVERTER_PYTHON "
           "(a Python with torch) for llama.cpp's converter")

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
# vocabulary it is (the tokenizer is not what this test is about).
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


def _hf_weights(model) -> dict[str, mx.array]:
    out = {}
    for name, value in hf_parameters(model).items():  # Gemma 4's experts stacked, fused
        if ".switch_mlp." in name:  # Qwen3-MoE's HF checkpoint keeps one tensor an expert
            for e in range(value.shape[0]):
                out[name.replace(".switch_mlp.", f".experts.{e}.")] = mx.array(value[e])
        else:
            out[name] = mx.array(value)
    return out


def _save_hf(case, model, dest: Path, tmp: Path) -> None:
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


# the cases whose config names one of those classes
CONVERTED = sorted(n for n, c in CASES.items() if c.config["model_type"] in HF_CLASSES
                   and n != "phi3-longrope")


@pytest.mark.parametrize("name", CONVERTED)
def test_llama_cpp_converter_writes_what_the_tiny_writer_writes(name: str,
                                                                tmp_path: Path) -> None:
    case = CASES[name]
    model = build_model(case, seed=3)
    _save_hf(case, model, tmp_path / "hf", tmp_path)
    theirs = tmp_path / "converted.gguf"
    # Qwen 3.5's converter wants MTP layers unless told there are none (the tiny model
    # has none; the loader's leaving out of a file's MTP blocks is tested apart)
    more = ', "--no-mtp"' if case.gguf_arch.startswith("qwen35") else ""
    run = subprocess.run([PYTHON, "-c", RUN.format(tree=LLAMA_CPP, src=str(tmp_path / "hf"),
                                                   out=str(theirs), more=more)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    ours = write_gguf(tmp_path / "ours.gguf", case, gguf_tensors(case, model))
    f_theirs, f_ours = read_gguf_file(theirs), read_gguf_file(ours)
    assert f_theirs.architecture == f_ours.architecture == case.gguf_arch
    assert hf_config(f_theirs, architecture(f_theirs)) == hf_config(f_ours, architecture(f_ours))
    assert set(f_theirs.tensors) == set(f_ours.tensors)
    for t in f_ours.tensors.values():
        other = f_theirs.tensors[t.name]
        assert other.shape == t.shape, t.name
        np.testing.assert_allclose(np.asarray(other.data, dtype=np.float32).reshape(t.shape),
                                   np.asarray(t.data, dtype=np.float32), rtol=0, atol=1e-6,
                                   err_msg=t.name)
    ids = mx.array([[1, 40, 50, 60, 70, 80, 90, 100, 110, 120, 3, 5, 7, 200]])
    ref = np.array(model(ids))
    got = np.array(load_model(str(theirs)).model(ids))
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()
