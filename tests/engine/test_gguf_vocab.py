"""Issue #45 (c): every test vocabulary llama.cpp ships with expected ids (its
``models/ggml-vocab-*.gguf`` with ``.inp``/``.out``, from the llama-cpp-python sdist: see
tests/llama_cpp_data.py) tokenizes, through the loader's tokenizer, to exactly llama.cpp's
ids: byte-level BPE with each pre-tokenizer, SentencePiece (Llama 2, Phi-3), Gemma 4's,
BERT's WordPiece. The ids are llama.cpp's own (``test-tokenizer-0``: no BOS, special
tokens not parsed from the text)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from engine.loader.gguf_file import read_gguf_file
from engine.loader.gguf_tokenizer import build_gguf_tokenizer
from tests.llama_cpp_data import models_dir, vocab_cases


@cache
def metadata(name: str) -> dict[str, Any]:
    return read_gguf_file(models_dir() / name).metadata


VOCABS = sorted(p.name for p in models_dir().glob("ggml-vocab-*.gguf")
                if Path(f"{p}.out").is_file())


def test_the_sdist_has_the_vocabularies_it_should() -> None:
    assert len(VOCABS) >= 15, VOCABS
    kinds = {metadata(v)["tokenizer.ggml.model"] for v in VOCABS}
    assert {"gpt2", "llama", "bert", "gemma4"} <= kinds


@pytest.mark.parametrize("name", VOCABS)
def test_token_ids_equal_llama_cpp(name: str) -> None:
    path = models_dir() / name
    tok = build_gguf_tokenizer(metadata(name), name)
    cases = vocab_cases(path)
    assert len(cases) >= 40
    wrong = [(text, ids, tok.encode(text, add_special_tokens=False)) for text, ids in cases
             if tok.encode(text, add_special_tokens=False) != ids]
    assert not wrong, f"{len(wrong)} of {len(cases)} differ, first: {wrong[0]!r}"
