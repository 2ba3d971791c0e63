"""A GGUF's string arrays (its vocabulary and merges) read by the native span finder equal
gguf-py's own parse (the Python loop), and one that runs past the end is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

import engine.loader.gguf_file as gguf_file
from engine.loader.errors import ModelLoadError

STRINGS = ["", "a", "Ġthe", "日本語", "<|im_start|>", "x" * 300, "\u2581\u2581", "Ġ Ġ"] * 50


def _write(path: Path) -> None:
    w = GGUFWriter(str(path), "llama")
    w.add_array("tokenizer.ggml.tokens", STRINGS)
    pairs = zip(STRINGS, STRINGS[1:], strict=False)
    w.add_array("tokenizer.ggml.merges", [f"{a} {b}" for a, b in pairs])
    w.add_array("tokenizer.ggml.scores", [float(i) for i in range(len(STRINGS))])
    w.add_string("general.name", "strings")
    w.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.usefixtures("native_built")
def test_native_spans_read_what_the_python_loop_reads(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.gguf"
    _write(path)
    assert gguf_file._native_string_spans() is not None
    fast = gguf_file.read_gguf_file(path)
    monkeypatch.setattr(gguf_file, "_native_string_spans", lambda: None)
    slow = gguf_file.read_gguf_file(path)
    assert fast.metadata["tokenizer.ggml.tokens"] == STRINGS
    assert fast.metadata["tokenizer.ggml.merges"] == slow.metadata["tokenizer.ggml.merges"]
    assert fast.metadata.keys() == slow.metadata.keys()
    assert np.array_equal(fast.metadata["tokenizer.ggml.scores"],
                          slow.metadata["tokenizer.ggml.scores"])
    assert np.array_equal(np.asarray(fast.tensors["token_embd.weight"].data),
                          np.asarray(slow.tensors["token_embd.weight"].data))


@pytest.mark.usefixtures("native_built")
def test_a_string_array_past_the_end_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.gguf"
    _write(path)
    raw = path.read_bytes()
    cut = raw.index(b"x" * 300) + 100  # inside the vocabulary
    (tmp_path / "cut.gguf").write_bytes(raw[:cut])
    with pytest.raises(ModelLoadError, match="truncated or corrupt"):
        gguf_file.read_gguf_file(tmp_path / "cut.gguf")
    from engine import native

    spans = np.empty(4, dtype=np.int64)  # two strings: the second's length is cut short
    assert native.extension().gguf_string_spans(np.zeros(12, np.uint8), 0, 2, spans) == -1
