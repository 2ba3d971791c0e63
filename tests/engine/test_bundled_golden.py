"""Golden tokens on the bundled SmolLM2 model: the engine against mlx-lm's own generator."""

import pytest

from engine import Engine, EngineConfig, SamplingParams
from tests.engine.conftest import run_to_end

pytestmark = pytest.mark.bundled

QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three prime numbers.",
    "Explain what a CPU cache is in one sentence.",
]
N = 24


@pytest.fixture(scope="module")
def bundled() -> Engine:
    """Exact float32 activations: these tests check that scheduling and batching give
    mlx-lm's tokens bit for bit. The CPU default rounds each linear's input to int8
    (llama.cpp's scheme), which can flip a near-tie such as the first question's first
    token (The 25.33 vs L 25.24); that mode is tested in test_native_model.py."""
    from engine.cpu_options import CpuOptions
    from engine.loader import bundled_model_path, load_model

    config = EngineConfig(max_concurrent=8, cpu=CpuOptions(int8=False))
    loaded = load_model(str(bundled_model_path()), cpu=config.cpu)
    return Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                  context_length=loaded.context_length, config=config)


def mlx_lm_tokens(reference, engine: Engine, prompts: list[list[int]],
                  n: int) -> list[list[int]]:
    """mlx-lm's greedy tokens on the model the engine was made from (its weights part of
    the kept reference's key: tests/mlx_reference.py)."""
    return reference.greedy(engine.model, engine.tokenizer, prompts, n)


def chat(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


def test_solo_greedy_equals_mlx_lm_generate(bundled, mlx_lm_greedy):
    stream = bundled.submit(messages=chat(QUESTIONS[0]), params=SamplingParams(max_tokens=N))
    run_to_end(bundled)
    [expected] = mlx_lm_tokens(mlx_lm_greedy, bundled, [stream.prompt_tokens], N)
    assert stream.tokens == expected
    assert "Paris" in stream.text


def test_batched_greedy_equals_each_solo_run(bundled, mlx_lm_greedy):
    streams = [bundled.submit(messages=chat(q), params=SamplingParams(max_tokens=N))
               for q in QUESTIONS]
    run_to_end(bundled)
    assert max(t.decode_rows for t in bundled.telemetry()[-N:]) == len(QUESTIONS)
    refs = mlx_lm_tokens(mlx_lm_greedy, bundled, [s.prompt_tokens for s in streams], N)
    for s, ref in zip(streams, refs, strict=True):
        assert s.tokens == ref, s.text
