"""Helpers for the engine tests (the `tiny` and `make_engine` fixtures are in tests/conftest.py)."""

from __future__ import annotations

import mlx.core as mx
import pytest
from mlx_lm.generate import generate_step

from engine import Engine, SamplingParams, testing


def reference_tokens(model, prompt: list[int], n: int, **kwargs) -> list[int]:
    """What mlx-lm's own single-sequence generator produces."""
    out = []
    for token, _ in generate_step(mx.array(prompt), model, max_tokens=n, **kwargs):
        out.append(int(token))
    return out


def quantized_tiny(seed: int, hidden: int = 64):
    """A tiny random-weight model quantized to 4 bits (group 32): the native kernels take it."""
    import mlx.nn as nn

    from tests.tiny_model import make_tiny_model

    tiny = make_tiny_model(seed=seed, hidden=hidden)
    nn.quantize(tiny.model, group_size=32, bits=4)
    mx.eval(tiny.model.parameters())
    return tiny


def engine_on(tiny, **config) -> Engine:
    """An Engine (not started: drive it with step()) on a tiny model, without EOS tokens."""
    from engine import EngineConfig

    return Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                  context_length=tiny.context_length, config=EngineConfig(**config))


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


def skip_without_native() -> None:
    """Build engine.native when it is missing and the tools exist (so CI exercises it);
    skip the calling test (or module fixture) otherwise. On a GPU the engine runs MLX's own
    kernels, never these CPU ones: the tests then run there as they are (what they check
    is the GPU path's answers)."""
    import mlx.core as mx

    if mx.default_device() != mx.cpu:
        return
    from engine.native import build as native_build

    reason = native_build.ensure_built()
    if reason is not None:
        pytest.skip(f"engine.native unavailable: {reason}")


def native_quantized_tiny(seed: int):
    """A quantized tiny model the native kernels run (their answers, log-probabilities
    included, do not depend on the batch: docs/determinism.md); skips without them (on
    a GPU: MLX's own kernels, see skip_without_native)."""
    skip_without_native()
    return quantized_tiny(seed=seed)


@pytest.fixture(scope="module")
def native_built() -> None:
    """engine.native built (on the CPU), else the module's tests skip.
    Use: pytestmark = pytest.mark.usefixtures("native_built")."""
    skip_without_native()


@pytest.fixture(scope="module")
def batch_invariant() -> None:
    """The device gives the same bits alone, batched, chunked and cached: the CPU with
    engine.native built. On Metal and CUDA MLX's kernels choose reductions by shape, so
    there is no such guarantee (docs/determinism.md): on an H200 (2026-11-30) these tests
    failed at the log-probabilities' last bits (-1.4448986 against -1.4449005), the tokens
    held. They skip there; the GPU path's own tests still run.
    Use: pytestmark = pytest.mark.usefixtures("batch_invariant")."""
    import mlx.core as mx

    if mx.default_device() != mx.cpu:
        pytest.skip("batch invariance is the CPU kernels' guarantee, not MLX's GPU kernels' "
                    "(docs/determinism.md)")
    skip_without_native()


STAGGERED_LENGTHS = [24, 9, 17, 30, 3, 12, 20, 6]


def run_staggered(engine: Engine, ps: list[list[int]]) -> list:
    """Submit the prompts two at a time with a tick between (solo, batched, joining and
    prefilling passes all happen), each for STAGGERED_LENGTHS tokens; run to the end."""
    streams = []
    for i, (p, n) in enumerate(zip(ps, STAGGERED_LENGTHS, strict=True)):
        streams.append(engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n)))
        if i % 2:
            engine.step()
    run_to_end(engine)
    return streams


def count_passes(engine, monkeypatch) -> list[str]:
    """Log the engine's forward passes ("prefill" or "decode") as they run."""
    runner, log = testing.internals(engine).runner, []
    one, many, decode = runner.prefill, runner.prefill_many, runner.decode
    monkeypatch.setattr(runner, "prefill",
                        lambda c, t, **kw: log.append("prefill") or one(c, t, **kw))
    monkeypatch.setattr(runner, "prefill_many",
                        lambda cs, ts, **kw: log.append("prefill") or many(cs, ts, **kw))
    monkeypatch.setattr(runner, "decode", lambda c, t: log.append("decode") or decode(c, t))
    return log


def drafting_pays(engine: Engine) -> Engine:
    """`engine` with measured step costs that say drafting always pays, so its rows draft
    whatever their real costs (on a tiny model a drafted position can cost more than the
    step it saves, and the engine would rightly stop drafting). For tests of what happens
    when rows draft; returns `engine`."""
    speculation = testing.internals(engine).speculation
    if speculation is not None:
        costs = speculation.costs
        costs.plain_s = dict.fromkeys(range(1, 257), 1.0)  # a long plain step, measured
        costs.alpha = 0.0  # and kept: plain ticks measured later do not pull it down
        costs.set_check(0.0)  # (stays 0: steps are shorter)
        costs.refresh_every = 10**9
    return engine
