"""The same-answer guarantee for GGUF files whose linears are (partly) unquantized.

llama.cpp leaves some tensors F32/F16 in its quantized mixes, and users run F16 and BF16
files. Such a linear is an ``nn.Linear`` holding float weights; its product must not depend
on how many rows share the pass, or a request's answer would depend on its batch, its
chunking and the prefix cache. Tiny llama files: a Q4_0 mix with one linear left F32, every
weight F16, every weight BF16; each request's greedy and seeded answer alone (one prompt
token a tick) equals its answer batched, chunked and from the prefix cache
(tests/engine/test_gguf_architectures.py's check, which runs on quantized files only).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, quants

from engine.loader import load_model
from tests.engine.test_gguf_architectures import (
    test_the_same_answer_batched_chunked_and_cached as same_answer_check,
)
from tests.engine.test_same_answer import KINDS
from tests.gguf_models import CASES, build_model, gguf_tensors, quantize, write_gguf

T = GGMLQuantizationType
CASE = CASES["llama"]


def _q4_with_f32_attn_output(tensors: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """Q4_0 everywhere but each layer's attn_output, left F32 (a llama-quantize mix that
    keeps a tensor float)."""
    return quantize(tensors, T.Q4_0, seed=5,
                    which=lambda n: None if ".attn_output." in n else T.Q4_0)


def _all_of(kind: T) -> Callable[[dict[str, np.ndarray]], tuple[dict, dict]]:
    """Every 2-D weight (embedding, linears, head) stored as `kind`; norms stay F32, as
    llama.cpp's converter writes an F16 or BF16 file."""
    def convert(tensors: dict[str, np.ndarray]) -> tuple[dict, dict]:
        out, raw = dict(tensors), {}
        for name, w in tensors.items():
            if w.ndim == 2 and name.endswith(".weight"):
                out[name], raw[name] = quants.quantize(w.astype(np.float32), kind), kind
        return out, raw
    return convert


FILES = {"q4_0-f32-attn-output": _q4_with_f32_attn_output, "f16": _all_of(T.F16),
         "bf16": _all_of(T.BF16)}


@pytest.fixture(scope="module", params=sorted(FILES))
def float_model(request, tmp_path_factory):
    tensors, raw = FILES[request.param](gguf_tensors(CASE, build_model(CASE, seed=2)))
    path = write_gguf(tmp_path_factory.mktemp(request.param) / "tiny.gguf", CASE, tensors,
                      raw_types=raw)
    return load_model(str(path))


@pytest.mark.usefixtures("native_built")
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_same_answer_with_float_linears(float_model, kind: str) -> None:
    same_answer_check(float_model, kind)


def test_the_files_hold_what_they_say(tmp_path: Path) -> None:
    """The fixtures' files really carry float linears of their type (else the check above
    would only repeat the quantized one)."""
    from engine.loader.gguf_file import read_gguf_file

    for name, convert in FILES.items():
        tensors, raw = convert(gguf_tensors(CASE, build_model(CASE, seed=2)))
        f = read_gguf_file(write_gguf(tmp_path / f"{name}.gguf", CASE, tensors,
                                      raw_types=raw))
        kinds = {n: t.kind for n, t in f.tensors.items()}
        want = {"q4_0-f32-attn-output": T.F32, "f16": T.F16, "bf16": T.BF16}[name]
        assert kinds["blk.0.attn_output.weight"] == want
        assert kinds["blk.0.attn_q.weight"] == (T.Q4_0 if name.startswith("q4") else want)
