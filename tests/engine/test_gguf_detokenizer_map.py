"""The byte-level BPE detokenizer of a GGUF's tokenizer gets its id → token map from the
file's token list (engine/loader/gguf.py, a load-time saving): it must be the map mlx-lm
builds by asking the tokenizer for every id, duplicates and added ids included."""

from __future__ import annotations

from pathlib import Path

from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer

from engine.loader import load_model
from tests.gguf_models import CASES, build_model, gguf_tensors, write_gguf


def test_the_token_map_is_mlx_lms(tmp_path: Path) -> None:
    case = CASES["llama"]
    path = write_gguf(tmp_path / "m.gguf", case, gguf_tensors(case, build_model(case)))
    tok = load_model(str(path)).tokenizer
    detok = tok.detokenizer
    assert isinstance(detok, BPEStreamingDetokenizer)
    hf = tok._tokenizer
    assert detok.tokenmap == BPEStreamingDetokenizer(hf).tokenmap
    ids = hf.encode("Hello, world! <|im_start|> 12 x", add_special_tokens=False)
    for i in ids:
        detok.add_token(i)
    detok.finalize()
    assert detok.text == hf.decode(ids)
