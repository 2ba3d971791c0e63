"""app/models/gguf_header.py: a header is read once while its file is unchanged (the library
describes every file at each look-up: the status bar's refresh did it each time), read again
when the file changes, and a vocabulary's strings are skipped in buffered steps."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from app.models import gguf_header
from app.models.gguf_header import GgufError, read_gguf_header


def write_gguf(path: Path, name: str, tokens: list[str]) -> Path:
    writer = GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_token_list(tokens)
    writer.add_context_length(256)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_an_unchanged_file_is_read_once(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", "first", ["a", "b"])
    header = read_gguf_header(path)
    assert header.metadata["general.name"] == "first"
    assert read_gguf_header(path) is header


def test_a_changed_file_is_read_again(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", "aaaa", ["a", "b"])
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert read_gguf_header(path).metadata["general.name"] == "aaaa"
    size = path.stat().st_size
    write_gguf(path, "bbbb", ["a", "b"])  # the same size: only the time tells
    assert path.stat().st_size == size
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert read_gguf_header(path).metadata["general.name"] == "bbbb"
    write_gguf(path, "bbbb", ["a", "b", "c" * 100])  # another size, the same time
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert path.stat().st_size > size
    assert read_gguf_header(path).metadata["tokenizer.ggml.tokens"] == 3


@pytest.mark.parametrize("chunk", [8, 13, 64, 1 << 20])
def test_strings_skipped_across_buffer_ends(tmp_path, monkeypatch, chunk):
    """Strings of every length, some longer than the buffer: the header after them reads
    as it does with the whole array in one buffer."""
    monkeypatch.setattr(gguf_header, "SKIP_CHUNK", chunk)
    tokens = ["x" * (i % 37) for i in range(3000)]
    header = gguf_header._read(write_gguf(tmp_path / "m.gguf", "many", tokens))
    assert header.metadata["tokenizer.ggml.tokens"] == 3000
    assert header.metadata["llama.context_length"] == 256  # written after the tokens
    assert header.tensor_names == {"token_embd.weight"} and header.parameters == 32


def test_a_file_ending_inside_its_strings_is_truncated(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", "cut", ["token"] * 2000)
    data = path.read_bytes()
    cut = data.index(b"token") + 500 * (8 + 5)  # inside the array
    path.write_bytes(data[:cut])
    with pytest.raises(GgufError, match="truncated"):
        read_gguf_header(path)
