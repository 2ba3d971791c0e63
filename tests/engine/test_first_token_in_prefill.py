"""A prompt's first token is sampled from the prefill pass that runs its last token."""

from engine import SamplingParams, testing
from engine.model_runner import output_head
from tests.engine.conftest import count_passes, prompts, reference_tokens, run_to_end

N = 8


def test_a_next_turn_costs_one_forward_pass_and_stays_exact(tiny, make_engine, monkeypatch):
    engine = make_engine()
    prompt = prompts(4, seed=31)[3]
    first = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=N))
    run_to_end(engine)
    turn = prompt + first.tokens + [5, 6, 7]
    log = count_passes(engine, monkeypatch)
    nxt = engine.submit(prompt_tokens=turn, params=SamplingParams(max_tokens=1))
    run_to_end(engine)
    assert nxt.stats.cached_tokens == len(turn) - 4  # the last reply token and 3 new ones
    assert log == ["prefill"]  # one pass: the new tokens and the first output token
    assert nxt.tokens == reference_tokens(tiny.model, turn, 1)


def test_a_model_with_an_unknown_head_gets_the_same_tokens(tiny, make_engine):
    assert output_head(tiny.model) is not None  # mlx-lm's llama: the head is found
    engine = make_engine(max_concurrent=8)
    testing.internals(engine).runner.head = None  # the generic path: every position's logits
    batch = prompts(6, seed=33)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N))
               for p in batch]
    run_to_end(engine)
    for p, s in zip(batch, streams, strict=True):
        assert s.tokens == reference_tokens(tiny.model, p, N)


def test_a_one_token_request_finishes_in_prefill_and_its_kv_is_kept(tiny, make_engine):
    engine = make_engine()
    prompt = prompts(4, seed=34)[2]
    one = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=1))
    run_to_end(engine)
    assert one.finish_reason == "length" and one.tokens == reference_tokens(tiny.model, prompt, 1)
    again = engine.submit(prompt_tokens=prompt + one.tokens + [3],
                          params=SamplingParams(max_tokens=N))
    run_to_end(engine)
    assert again.stats.cached_tokens == len(prompt)  # the whole prompt ran through the model
    assert again.tokens == reference_tokens(tiny.model, prompt + one.tokens + [3], N)
