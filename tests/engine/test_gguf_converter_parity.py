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

import os
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from engine.loader import load_model
from engine.loader.gguf_arch import architecture, hf_config
from engine.loader.gguf_file import read_gguf_file
from tests.gguf_converter import convert, converts
from tests.gguf_models import CASES, build_model, gguf_tensors, write_gguf

LLAMA_CPP = os.environ.get("BATCHCHAT_LLAMA_CPP")
PYTHON = os.environ.get("BATCHCHAT_CONVERTER_PYTHON")
pytestmark = pytest.mark.skipif(
    not (LLAMA_CPP and PYTHON),
    reason="needs BATCHCHAT_LLAMA_CPP (llama.cpp's tree) and BATCHCHAT_CONVERTER_PYTHON "
           "(a Python with torch) for llama.cpp's converter")

# the cases whose config names a class the converter is run on
CONVERTED = sorted(n for n, c in CASES.items() if converts(c))


@pytest.mark.parametrize("name", CONVERTED)
def test_llama_cpp_converter_writes_what_the_tiny_writer_writes(name: str,
                                                                tmp_path: Path) -> None:
    case = CASES[name]
    model = build_model(case, seed=3)
    theirs = convert(case, model, tmp_path, tree=LLAMA_CPP, python=PYTHON)
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
