"""A lone sequence's next step starts before its token is delivered; nothing else changes."""

from engine import SamplingParams
from engine.decode_batch import DecodeBatch
from tests.engine.conftest import prompts, reference_tokens, run_to_end

N = 20


def _count_decodes(engine, monkeypatch) -> list[int]:
    calls: list[int] = []
    real = engine._core.runner.decode
    monkeypatch.setattr(engine._core.runner, "decode",
                        lambda cache, tokens: calls.append(1) or real(cache, tokens))
    return calls


def test_lone_sequence_runs_ahead_with_exact_tokens_and_no_wasted_step(tiny, make_engine,
                                                                      monkeypatch):
    engine = make_engine()
    calls = _count_decodes(engine, monkeypatch)
    prompt = prompts(1, seed=21)[0]
    stream = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=N))
    saw_ahead = 0
    while engine.has_work():
        engine.step()
        saw_ahead += engine._core.batch.ahead is not None
    assert stream.tokens == reference_tokens(tiny.model, prompt, N)
    assert saw_ahead >= N - 3  # every tick but the last ones started the next step early
    # The first token comes from the prefill pass; none of the N - 1 steps was thrown away.
    assert len(calls) == N - 1
    assert engine._core.batch.ahead is None


def test_a_newcomer_rolls_the_started_step_back_and_both_stay_exact(tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    first, second = prompts(2, seed=22)
    s1 = engine.submit(prompt_tokens=first, params=SamplingParams(max_tokens=N))
    for _ in range(6):
        engine.step()
    assert engine._core.batch.ahead is not None
    s2 = engine.submit(prompt_tokens=second, params=SamplingParams(max_tokens=N))
    engine.step()
    # One token a tick, as without run-ahead (a first tick also gives the prefill's token).
    assert len(s1.tokens) == 8 and len(s2.tokens) == 2
    run_to_end(engine)
    assert s1.tokens == reference_tokens(tiny.model, first, N)
    assert s2.tokens == reference_tokens(tiny.model, second, N)


def test_cancel_with_a_step_in_flight_leaves_the_engine_clean(tiny, make_engine):
    engine = make_engine()
    a, b = prompts(2, seed=23)
    sa = engine.submit(prompt_tokens=a, params=SamplingParams(max_tokens=N))
    for _ in range(4):
        engine.step()
    assert engine._core.batch.ahead is not None
    sa.cancel()
    engine.step()
    assert sa.finish_reason == "cancelled" and engine._core.batch.ahead is None
    sb = engine.submit(prompt_tokens=b, params=SamplingParams(max_tokens=N))
    run_to_end(engine)
    assert sb.tokens == reference_tokens(tiny.model, b, N)


def test_seeded_sampling_is_the_same_with_and_without_running_ahead(tiny, make_engine,
                                                                    monkeypatch):
    prompt = prompts(1, seed=24)[0]
    params = SamplingParams(max_tokens=N, temperature=0.9, top_p=0.95, seed=7)
    ahead = make_engine()
    s1 = ahead.submit(prompt_tokens=prompt, params=params)
    run_to_end(ahead)
    monkeypatch.setattr(DecodeBatch, "_may_run_ahead", lambda self, seqs: False)
    plain = make_engine()
    s2 = plain.submit(prompt_tokens=prompt, params=params)
    run_to_end(plain)
    assert s1.tokens == s2.tokens and len(s1.tokens) == N


def test_a_repetition_penalty_runs_ahead_with_the_same_tokens(tiny, make_engine, monkeypatch):
    """The penalty reads the history, whose last token the started step has not read back
    yet: it is taken from the graph. Tokens equal a run that never starts a step early."""
    prompt = prompts(1, seed=25)[0]
    for params in (SamplingParams(max_tokens=N, repetition_penalty=1.3),  # greedy
                   SamplingParams(max_tokens=N, temperature=0.8, top_p=0.9, min_p=0.05,
                                  repetition_penalty=1.2, repetition_context_size=4, seed=3)):
        ahead = make_engine()
        s1 = ahead.submit(prompt_tokens=prompt, params=params)
        saw_ahead = 0
        while ahead.has_work():
            ahead.step()
            saw_ahead += ahead._core.batch.ahead is not None
        assert saw_ahead >= N - 3
        with monkeypatch.context() as m:
            m.setattr(DecodeBatch, "_may_run_ahead", lambda self, seqs: False)
            plain = make_engine()
            s2 = plain.submit(prompt_tokens=prompt, params=params)
            run_to_end(plain)
        assert s1.tokens == s2.tokens and len(s1.tokens) == N
    # and the greedy one is what mlx-lm's own generator gives with that penalty
    from mlx_lm.sample_utils import make_logits_processors

    greedy = SamplingParams(max_tokens=N, repetition_penalty=1.3)
    engine = make_engine()
    s = engine.submit(prompt_tokens=prompt, params=greedy)
    run_to_end(engine)
    want = reference_tokens(tiny.model, prompt, N, logits_processors=make_logits_processors(
        repetition_penalty=1.3, repetition_context_size=greedy.repetition_context_size))
    assert s.tokens == want
