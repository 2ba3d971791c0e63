"""The tiny mmproj writer of tests/mmproj_models.py held to llama.cpp's own converter.

For each family, the tiny VLM's vision tower and projector are saved as a Hugging Face
checkpoint (Hugging Face's names and layouts, its config, preprocessor and processor
configs) and converted by llama.cpp's ``convert_hf_to_gguf.py --mmproj`` (F32, F16 and
Q8_0): the
converter's file must hold the same keys, tensor names, types, shapes and values as the
tiny writer's, and the engine must load it beside the text GGUF with the same answer.
Like test_gguf_converter_parity.py, this needs BATCHCHAT_LLAMA_CPP (llama.cpp's tree) and
BATCHCHAT_CONVERTER_PYTHON (a Python with torch); CI has neither. Run on 2026-11-29 with
llama-cpp-python 0.3.36's tree: docs/loader.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from engine import Engine, SamplingParams
from engine.loader.gguf_file import read_gguf_file
from tests.engine.conftest import run_to_end
from tests.mmproj_models import (
    OUTTYPES,
    PIXTRAL,
    PROJECTOR,
    hf_vision_weights,
    make_tiny_pair,
    write_mmproj,
)
from tests.vision_models import png_bytes

LLAMA_CPP = os.environ.get("BATCHCHAT_LLAMA_CPP")
PYTHON = os.environ.get("BATCHCHAT_CONVERTER_PYTHON")
pytestmark = pytest.mark.skipif(
    not (LLAMA_CPP and PYTHON),
    reason="needs BATCHCHAT_LLAMA_CPP (llama.cpp's tree) and BATCHCHAT_CONVERTER_PYTHON "
           "(a Python with torch) for llama.cpp's converter")

HF_CLASSES = {"gemma3": "Gemma3ForConditionalGeneration",
              "idefics3": "Idefics3ForConditionalGeneration",
              "smolvlm": "SmolVLMForConditionalGeneration",
              "qwen2_vl": "Qwen2VLForConditionalGeneration",
              "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
              "qwen3_vl": "Qwen3VLForConditionalGeneration",
              "mistral3": "Mistral3ForConditionalGeneration",
              "pixtral": "LlavaForConditionalGeneration",  # Pixtral 12B's
              "lfm2-vl": "Lfm2VlForConditionalGeneration",
              "gemma4": "Gemma4ForConditionalGeneration"}


def _save_hf(vlm: Path, dest: Path) -> None:
    """The VLM's image side as the hub's checkpoint holds it (the converter skips the
    language model's tensors when writing an mmproj)."""
    dest.mkdir()
    config = json.loads((vlm / "config.json").read_text())
    config["architectures"] = [HF_CLASSES[config["model_type"]]]
    config["torch_dtype"] = "float32"
    if config["model_type"] == "lfm2-vl":  # the hub's SigLIP2 config names its epsilon
        config["vision_config"]["layer_norm_eps"] = 1e-6
    if config["model_type"] in PIXTRAL:  # Mistral Small 3.1's / Pixtral 12B's tower
        config["vision_config"]["hidden_act"] = "silu"  # activation; the converter finds
        # [IMG_BREAK] by name
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(vlm / name, dest / name)
    family = config["model_type"]
    if family == "pixtral":  # Pixtral 12B's config.json: a llava model, a pixtral tower
        config["model_type"] = "llava"
    (dest / "config.json").write_text(json.dumps(config))
    for name in ("preprocessor_config.json", "processor_config.json"):
        if (vlm / name).is_file():  # (Gemma 4's image settings: processor_config.json)
            shutil.copy(vlm / name, dest / name)
    weights = {k: mx.array(v) for k, v in hf_vision_weights(vlm).items()}
    if family in PIXTRAL:  # (LlavaVisionModel would copy [IMG_BREAK]'s row
        # out of it, but MmprojModel.filter_tensors drops language_model.* first)
        key = "language_model.model.embed_tokens.weight"
        weights[key] = mx.load(str(vlm / "model.safetensors"))[key]
    if config["model_type"] == "gemma3":  # the hub's bare parameter name
        weights = {k.replace("mm_input_projection.weight", "mm_input_projection_weight"): v
                   for k, v in weights.items()}
    mx.save_safetensors(str(dest / "model.safetensors"), weights, metadata={"format": "pt"})


@pytest.mark.parametrize("outtype", sorted(OUTTYPES))
@pytest.mark.parametrize("family", sorted(PROJECTOR))
def test_llama_cpp_converter_writes_what_the_tiny_mmproj_writer_writes(family, outtype,
                                                                     tmp_path):
    vlm, text, ours = make_tiny_pair(tmp_path, family)
    if outtype != "f32":
        ours = write_mmproj(vlm, ours, outtype=outtype)
    _save_hf(vlm, tmp_path / "hf")
    theirs = tmp_path / "converted" / "mmproj-theirs.gguf"
    theirs.parent.mkdir()
    run = subprocess.run(
        [PYTHON, str(Path(LLAMA_CPP) / "convert_hf_to_gguf.py"), str(tmp_path / "hf"),
         "--mmproj", "--outtype", outtype, "--outfile", str(theirs)],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    f_theirs, f_ours = read_gguf_file(theirs), read_gguf_file(ours)
    keys = {k for k in f_theirs.metadata if k.startswith(("clip.", "general.type",
                                                           "general.architecture"))}
    assert keys == {k for k in f_ours.metadata if k.startswith(("clip.", "general.type",
                                                                "general.architecture"))}
    for k in keys:
        a, b = f_theirs.metadata[k], f_ours.metadata[k]
        if isinstance(b, str):
            assert a == b, k
        else:
            np.testing.assert_allclose(np.asarray(a, dtype=np.float64),
                                       np.asarray(b, dtype=np.float64), rtol=1e-6, err_msg=k)
    assert set(f_theirs.tensors) == set(f_ours.tensors)
    for t in f_ours.tensors.values():
        other = f_theirs.tensors[t.name]
        assert (other.kind, other.shape) == (t.kind, t.shape), t.name
        np.testing.assert_array_equal(np.asarray(other.data), np.asarray(t.data), t.name)
    # the converter's own file beside the text GGUF answers as the tiny writer's (and, F32,
    # as the folder: test_mmproj_pair)
    shutil.copy(text, theirs.parent / text.name)
    params = SamplingParams(max_tokens=8, temperature=0.0)
    messages = [{"role": "user", "content": [{"type": "image"},
                                             {"type": "text", "text": "what is it?"}]}]
    got = []
    for model in (text, theirs.parent / text.name):
        engine = Engine.load(str(model))
        assert engine.sees_images
        tokens: list[int] = []
        engine.submit(messages=messages, params=params, images=[png_bytes((200, 10, 10))]) \
            .listen(lambda e, t=tokens: t.append(e.token) if e.token is not None else None)
        run_to_end(engine)
        got.append(tokens)
    assert got[0] == got[1]
