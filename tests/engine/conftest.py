"""Helpers for the engine tests (the `tiny` and `make_engine` fixtures are in tests/conftest.py)."""

from __future__ import annotations

import mlx.core as mx
from mlx_lm.generate import generate_step

from engine import Engine


def reference_tokens(model, prompt: list[int], n: int, **kwargs) -> list[int]:
    """What mlx-lm's own single-sequence generator produces."""
    out = []
    for token, _ in generate_step(mx.array(prompt), model, max_tokens=n, **kwargs):
        out.append(int(token))
    return out


def run_to_end(engine: Engine, max_ticks: int = 10_000) -> int:
    ticks = 0
    while engine.has_work():
        engine.step()
        ticks += 1
        assert ticks < max_ticks, "engine did not finish"
    return ticks


def prompts(n: int, seed: int = 1) -> list[list[int]]:
    """n prompts of different lengths (1 .. ~40 tokens) from the tiny byte vocabulary."""
    import random

    rng = random.Random(seed)
    lengths = [1, 3, 17, 40, 8, 25, 2, 33, 12, 5, 29, 19, 7, 38, 11, 4]
    return [[rng.randrange(0, 256) for _ in range(lengths[i % len(lengths)])] for i in range(n)]
