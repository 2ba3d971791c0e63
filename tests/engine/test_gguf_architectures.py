"""Issue #45 (b) and (e): every architecture the GGUF loader takes, from tiny random-weight
files written as llama.cpp's converter writes them (tests/gguf_models.py).

(b) An F32 file gives the logits mlx-lm gives on the same weights built from the Hugging
Face-style config (relative 1e-4).
(e) A quantized file keeps the same-answer guarantee in the engine: a greedy and a seeded
request give, token for token and log-probability for log-probability, the answer they give
alone with one prompt token a tick, when batched with other requests joining and leaving,
when their prompt is chunked, and from the prefix cache.
"""

from __future__ import annotations

import random
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from gguf import GGMLQuantizationType, dequantize

from engine import SamplingParams
from engine.cache import fixed_state
from engine.loader import load_model
from engine.loader.ggml_modules import dequantize_groups
from engine.loader.gguf_file import read_gguf_file
from tests.engine.conftest import engine_on, run_to_end
from tests.engine.test_same_answer import KINDS, REFERENCE_CONFIG, Run, other_params
from tests.gguf_models import CASES, build_model, gguf_tensors, quantize, write_gguf

T = GGMLQuantizationType
IDS = [1, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 3, 5, 7, 9, 11, 13, 200]


@pytest.mark.parametrize("name", sorted(CASES))
def test_f32_file_gives_mlx_lm_logits_on_the_same_weights(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    reference = build_model(case, seed=1)
    path = write_gguf(tmp_path / f"{name}.gguf", case, gguf_tensors(case, reference))
    loaded = load_model(str(path))
    ids = mx.array([IDS])
    ref, got = np.array(reference(ids)), np.array(loaded.model(ids))
    assert got.shape == ref.shape == (1, len(IDS), case.config["vocab_size"])
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()
    assert loaded.context_length == case.config["max_position_embeddings"]


def test_gemma4_fused_experts_are_kept_quantized_and_split_exactly(tmp_path: Path) -> None:
    """Gemma 4's converter writes each layer's gate and up experts as one tensor
    (ffn_gate_up_exps); the loader gives mlx-lm's two halves of it still quantized, each
    equal to gguf-py's dequantize of its rows, bit for bit in float32."""
    case = CASES["gemma4-moe"]
    tensors, raw = quantize(gguf_tensors(case, build_model(case)), T.Q4_1, seed=3,
                            which=lambda n: T.Q4_1 if "_exps." in n else None)
    path = write_gguf(tmp_path / "moe.gguf", case, tensors, raw_types=raw)
    f, layers = read_gguf_file(path), load_model(str(path)).model.layers
    for i, layer in enumerate(layers):
        fused = f.tensors[f"blk.{i}.ffn_gate_up_exps.weight"]
        want = dequantize(np.asarray(fused.data), fused.kind)
        half = want.shape[-2] // 2
        for proj, rows in (("gate_proj", want[:, :half]), ("up_proj", want[:, half:])):
            m = getattr(layer.experts.switch_glu, proj)
            assert m.bits == 4 and m.group_size == 32  # Q4_1's exact form, not floats
            got = np.array(dequantize_groups(m.weight, m.scales, m.biases, 32, 4))
            assert np.array_equal((got + np.float32(0)).view(np.uint32),
                                  (rows + np.float32(0)).view(np.uint32)), (i, proj)


def _mixed_types(name: str) -> T | None:
    """Q4_0 and Q8_0 (blocks of 32: the tiny dims), as a mixed llama-quantize file is."""
    if name == "token_embd.weight" or ".ffn_down" in name or ".attn_v." in name:
        return T.Q8_0
    return T.Q4_0


@pytest.fixture(scope="module", params=sorted(CASES))
def quantized(request, tmp_path_factory):
    name = request.param
    case = CASES[name]
    tensors, raw = quantize(gguf_tensors(case, build_model(case, seed=2)), T.Q4_0, seed=5,
                            which=_mixed_types)
    path = write_gguf(tmp_path_factory.mktemp(name) / f"{name}.gguf", case, tensors,
                      raw_types=raw)
    return load_model(str(path))


def _answer(run: Run) -> tuple:
    assert run.stream.finish_reason == "length", run.stream.error
    return tuple((e.token, e.logprob, e.top_logprobs) for e in run.events)


def _prompt(seed: int, n: int = 40) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 260) for _ in range(n)]


@pytest.mark.usefixtures("batch_invariant")
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_same_answer_batched_chunked_and_cached(quantized, kind: str) -> None:
    params = KINDS[kind](n=10, logprobs=2)
    prompt = _prompt(7)
    ref_engine = engine_on(quantized, **REFERENCE_CONFIG)
    ref = Run(ref_engine, prompt, params)
    run_to_end(ref_engine)
    expected = _answer(ref)

    rng = random.Random(11)
    engine = engine_on(quantized, max_concurrent=8, prefill_burst=7, whole_prompt_tokens=0)
    others = [Run(engine, _prompt(rng.randrange(1000), rng.randint(3, 30)),
                  other_params(rng)) for _ in range(3)]
    engine.step()
    target = Run(engine, prompt, params)  # chunked 7 a tick while the others decode
    for _ in range(4):
        engine.step()
        others.append(Run(engine, _prompt(rng.randrange(1000), 9), other_params(rng)))
    run_to_end(engine)
    assert _answer(target) == expected

    again = Run(engine, prompt, params)  # the prompt's KV from the prefix cache
    Run(engine, _prompt(99, 12), SamplingParams(max_tokens=6))
    run_to_end(engine)
    # a recurrent state (Qwen 3.5) cannot be cut back to a prefix: the same prompt again
    # (Regenerate) would need an entry one token shorter, which is not kept
    hybrid = fixed_state(quantized.model)
    assert (again.stream.stats.cached_tokens > 0) is not hybrid
    assert not any("prefix cache" in n for n in engine.notes)
    assert _answer(again) == expected
    if hybrid:
        _next_turn_reuses_the_reply(quantized, engine, prompt + list(expected_tokens(again)),
                                    params)


def expected_tokens(run: Run) -> list[int]:
    return [e.token for e in run.events]


def _next_turn_reuses_the_reply(model, engine, turn: list[int], params) -> None:
    """A hybrid model's next turn (the prompt, the reply, a new message) starts from the
    reply's entry, whole (its state at every position but the reply's last token), batched
    beside another request, and answers as a fresh engine does."""
    nxt = turn + _prompt(23, 6)
    ref_engine = engine_on(model, **REFERENCE_CONFIG)
    ref = Run(ref_engine, nxt, params)
    run_to_end(ref_engine)
    run = Run(engine, nxt, params)
    Run(engine, _prompt(98, 12), SamplingParams(max_tokens=6))
    run_to_end(engine)
    assert run.stream.stats.cached_tokens == len(turn) - 1
    assert _answer(run) == _answer(ref)


def test_a_tied_gemma3_file_loads_with_its_embedding_as_the_head(tmp_path: Path) -> None:
    """Google's Gemma 3 checkpoints tie the head, so llama.cpp's converter writes no
    output.weight; mlx-lm's gemma3_text builds a head anyway and drops it only in sanitize.
    The file must load (it was refused as 'missing lm_head.weight') and give mlx-lm's logits
    on the same weights, the embedding serving as the head."""
    from dataclasses import replace

    case = replace(CASES["gemma3"], config=CASES["gemma3"].config | {"tie_word_embeddings": True})
    reference = build_model(case, seed=3)
    reference.sanitize({})  # what mlx-lm does for weights without lm_head: tie
    assert reference.tie_word_embeddings and "lm_head" not in reference
    tensors = gguf_tensors(case, reference)
    assert "output.weight" not in tensors
    path = write_gguf(tmp_path / "gemma3-tied.gguf", case, tensors)
    loaded = load_model(str(path))
    assert loaded.model.tie_word_embeddings and "lm_head" not in loaded.model
    ids = mx.array([IDS])
    ref, got = np.array(reference(ids)), np.array(loaded.model(ids))
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()


def test_a_shared_expert_gate_without_its_unit_axis_loads(tmp_path: Path) -> None:
    """llama-quantize writes every tensor again without its trailing size-1 ggml dimensions,
    so Qwen 3.5 MoE's shared-expert gate, (1, hidden) as the converter writes it, is
    (hidden,) in every quantized file (found by bench/arch_parity.py: its Q8_0 and Q4_K_M
    were refused). The loader gives the weight back its axis: the F32 file's logits."""
    case = CASES["qwen35moe"]
    reference = build_model(case, seed=1)
    tensors = gguf_tensors(case, reference)
    gates = [n for n in tensors if n.endswith(".ffn_gate_inp_shexp.weight")]
    assert gates and all(tensors[n].shape == (1, case.config["hidden_size"]) for n in gates)
    flat = {n: w.reshape(-1) if n in gates else w for n, w in tensors.items()}
    path = write_gguf(tmp_path / "flat.gguf", case, flat)
    assert read_gguf_file(path).tensors[gates[0]].shape == (case.config["hidden_size"],)
    ids = mx.array([IDS])
    ref, got = np.array(reference(ids)), np.array(load_model(str(path)).model(ids))
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()
