"""The prefix cache of a hybrid model (Qwen 3.5: Gated DeltaNet layers whose recurrent state
cannot be cut back to a shorter prefix): an entry is reused only whole, at exactly its
length, which a chat's next turn is (the reply's entry holds the prompt and every output
token but the last); such a turn answers as a fresh engine does; a prompt that diverges
inside an entry (Regenerate included) prefills in full; each entry's state is counted in
the prefix budget; the disk store keeps plain KV only (entries stay in memory)."""

from __future__ import annotations

import random

import pytest

from engine import SamplingParams, kv_memory
from engine.testing import internals
from tests.engine.conftest import engine_on, run_to_end
from tests.engine.test_same_answer import KINDS, REFERENCE_CONFIG, Run

pytestmark = pytest.mark.usefixtures("native_built")


@pytest.fixture(scope="module")
def qwen35(tmp_path_factory):
    """A tiny Qwen 3.5 in Q4_0 and Q8_0, as test_gguf_architectures' (quantized weights run
    the engine's kernels, which give a row the same bits in any pass; float32 weights take
    BLAS, whose sums differ between one position and many)."""
    from gguf import GGMLQuantizationType as T

    from engine.loader import load_model
    from tests.gguf_models import CASES, build_model, gguf_tensors, quantize, write_gguf

    def types(name: str) -> T:
        return T.Q8_0 if name == "token_embd.weight" or ".ffn_down" in name else T.Q4_0

    case = CASES["qwen35"]
    tensors, raw = quantize(gguf_tensors(case, build_model(case, seed=3)), T.Q4_0, seed=5,
                            which=types)
    path = write_gguf(tmp_path_factory.mktemp("qwen35") / "qwen35.gguf", case, tensors,
                      raw_types=raw)
    return load_model(str(path))


def _tokens(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 260) for _ in range(n)]


def _answer(run: Run) -> tuple:
    assert run.stream.finish_reason == "length", run.stream.error
    return tuple((e.token, e.logprob, e.top_logprobs) for e in run.events)


def _fresh(model, prompt: list[int], params: SamplingParams) -> tuple:
    """The answer alone, one prompt token a tick, no prefix cache."""
    engine = engine_on(model, **REFERENCE_CONFIG)
    run = Run(engine, prompt, params)
    run_to_end(engine)
    return _answer(run)


def _turn(engine, prompt: list[int], params: SamplingParams) -> Run:
    run = Run(engine, prompt, params)
    run_to_end(engine)
    return run


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_second_turn_reuses_the_first_turns_entry_and_answers_as_fresh(qwen35, kind
                                                                          ) -> None:
    params = KINDS[kind](n=8, logprobs=2)
    engine = engine_on(qwen35)
    assert not any("prefix cache" in n for n in engine.notes)
    first = _turn(engine, _tokens(1, 30), params)
    assert first.stream.stats.cached_tokens == 0
    turn = _tokens(1, 30) + [e.token for e in first.events]
    nxt = turn + _tokens(2, 5)  # the reply spliced in, then the user's next message
    second = _turn(engine, nxt, params)
    # every position the first turn ran: its prompt and reply but the reply's last token
    assert second.stream.stats.cached_tokens == len(turn) - 1
    s = engine.stats()
    assert (s.prefix_hits, s.prefix_hit_tokens) == (1, len(turn) - 1)
    assert _answer(second) == _fresh(qwen35, nxt, params)
    third = nxt + [e.token for e in second.events] + _tokens(3, 4)  # and once more
    run = _turn(engine, third, params)
    assert run.stream.stats.cached_tokens == len(nxt) + params.max_tokens - 1
    assert _answer(run) == _fresh(qwen35, third, params)


def test_an_entry_is_not_reused_for_a_prompt_that_diverges_inside_it(qwen35) -> None:
    params = KINDS["greedy"](n=6, logprobs=2)
    engine = engine_on(qwen35)
    prompt = _tokens(4, 24)
    first = _turn(engine, prompt, params)
    entry = prompt + [e.token for e in first.events][:-1]  # what the cache holds
    assert engine.stats().prefix_cached_tokens == len(entry)
    diverging = [
        prompt[:16] + _tokens(5, 20),  # inside the prompt
        entry[:-1] + [entry[-1] + 1] + _tokens(6, 5),  # at the entry's last token
        prompt + [first.events[0].token + 1] + _tokens(7, 3),  # another reply
        prompt,  # Regenerate: the entry is longer than all but its last token
    ]
    for p in diverging:
        run = _turn(engine, p, params)
        assert run.stream.stats.cached_tokens == 0, p
        assert _answer(run) == _fresh(qwen35, p, params)
    # Regenerate's prompt, kept while it decoded, is whole inside a longer prompt
    longer = prompt + _tokens(10, 3)
    run = _turn(engine, longer, params)
    assert run.stream.stats.cached_tokens == len(prompt)
    assert _answer(run) == _fresh(qwen35, longer, params)


def test_each_entry_holds_its_kv_and_a_whole_state_in_the_prefix_budget(qwen35,
                                                                         monkeypatch) -> None:
    per_token = kv_memory.bytes_per_token(qwen35.model)
    state = kv_memory.state_bytes(qwen35.model)
    assert state > 0
    params = SamplingParams(max_tokens=5)

    def kept(prefix_budget: int | None) -> tuple[int, int]:
        """The finished request's entry: (entries, bytes kept). (While it decodes, its
        prompt's entry shares its growing buffer, and a small budget evicts that.)"""
        engine = engine_on(qwen35)
        if prefix_budget is not None:
            monkeypatch.setattr(internals(engine).kv, "prefix_budget", prefix_budget)
        _turn(engine, _tokens(8, 20), params)
        s = engine.stats()
        return s.prefix_entries, s.prefix_cached_bytes

    n = 20 + 5 - 1
    assert kept(None) == (1, per_token * n + state)
    assert kept(per_token * n + state) == (1, per_token * n + state)
    # room for its KV but not its state: the entry gives way
    assert kept(per_token * n + state - 1) == (0, 0)


def test_entries_stay_in_memory_when_a_disk_store_is_set(qwen35, tmp_path) -> None:
    engine = engine_on(qwen35, kv_disk_dir=str(tmp_path))
    assert any("KV cache across restarts off" in n for n in engine.notes)
    first = _turn(engine, _tokens(9, 12), SamplingParams(max_tokens=4))
    nxt = _tokens(9, 12) + [e.token for e in first.events] + [7]
    assert _turn(engine, nxt, SamplingParams(max_tokens=4)).stream.stats.cached_tokens == 15
    assert engine.stats().prefix_disk_files == 0
    assert not list(tmp_path.glob("*.safetensors"))
