"""mlx-lm's own greedy tokens for a model and prompt, kept for the test session.

On the CPU, MLX's quantized matmuls are slow (the bundled model: seconds a reply), and the
golden tests compare the engine against the same references again and again (the same four
questions in test_bundled_golden.py and test_native_model.py). The reference depends only on
the model's weights, the prompt, the token count and the end tokens, and MLX's greedy path
gives the same tokens every run, so it is computed once a session and kept in a folder the
xdist workers share, keyed by all of those (the weights by a hash of every parameter's bytes:
a changed or swapped model is a different key, never a stale answer).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
from filelock import FileLock
from mlx.utils import tree_flatten


def weights_key(model: Any) -> str:
    """A hash of every parameter's name, dtype, shape and bytes."""
    h = hashlib.blake2b(digest_size=16)
    for name, value in tree_flatten(model.parameters()):
        mx.eval(value)
        h.update(f"{name}|{value.dtype}|{value.shape}".encode())
        # bfloat16 has no numpy type: view the bytes as 16-bit integers
        raw = value.view(mx.uint16) if value.dtype == mx.bfloat16 else value
        h.update(np.asarray(raw).tobytes())
    return h.hexdigest()


def greedy_tokens(model: Any, tokenizer: Any, prompt: list[int], n: int) -> list[int]:
    """Every token mlx-lm's stream_generate yields for `prompt` (greedy, at most `n`, ending
    at the tokenizer's end tokens as it does)."""
    from mlx_lm import stream_generate

    return [r.token for r in stream_generate(model, tokenizer, prompt, max_tokens=n)]


class ReferenceCache:
    """`greedy(model, tokenizer, prompts, n)`: greedy_tokens for each prompt, computed once a
    session for each (weights, prompt, n, end tokens) and kept as JSON under `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def greedy(self, model: Any, tokenizer: Any, prompts: list[list[int]],
               n: int) -> list[list[int]]:
        weights = weights_key(model)  # hashed at each call: a model changed in place misses
        ends = sorted(int(t) for t in tokenizer.eos_token_ids)
        return [self._one(weights, ends, model, tokenizer, p, n) for p in prompts]

    def _one(self, weights: str, ends: list[int], model: Any, tokenizer: Any,
             prompt: list[int], n: int) -> list[int]:
        key = json.dumps([weights, [int(t) for t in prompt], n, ends])
        path = self.folder / (hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
                              + ".json")
        self.folder.mkdir(parents=True, exist_ok=True)
        # one worker computes a reference while another that wants it waits (idle, not
        # computing it a second time)
        with FileLock(path.with_suffix(".lock")):
            if path.exists():
                kept = json.loads(path.read_text())
                if kept["key"] == key:
                    return kept["tokens"]
            tokens = greedy_tokens(model, tokenizer, prompt, n)
            path.write_text(json.dumps({"key": key, "tokens": tokens}))
        return tokens
