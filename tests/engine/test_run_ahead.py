"""A lone sequence's next step starts before its token is delivered; nothing else changes."""

from engine import SamplingParams, testing
from engine.decode_batch import DecodeBatch
from tests.engine.conftest import prompts, reference_tokens, run_to_end

N = 20


def _count_decodes(engine, monkeypatch) -> list[int]:
    calls: list[int] = []
    runner = testing.internals(engine).runner
    real = runner.decode
    monkeypatch.setattr(runner, "decode",
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
        saw_ahead += testing.facts(engine).running_ahead
    assert stream.tokens == reference_tokens(tiny.model, prompt, N)
    assert saw_ahead >= N - 3  # every tick but the last ones started the next step early
    # The first token comes from the prefill pass; none of the N - 1 steps was thrown away.
    assert len(calls) == N - 1
    assert not testing.facts(engine).running_ahead


def test_a_newcomer_rolls_the_started_step_back_and_both_stay_exact(tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    first, second = prompts(2, seed=22)
    s1 = engine.submit(prompt_tokens=first, params=SamplingParams(max_tokens=N))
    for _ in range(6):
        engine.step()
    assert testing.facts(engine).running_ahead
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
    assert testing.facts(engine).running_ahead
    sa.cancel()
    engine.step()
    assert sa.finish_reason == "cancelled" and not testing.facts(engine).running_ahead
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
            saw_ahead += testing.facts(ahead).running_ahead
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


# -- a batch running ahead (on a GPU by default; asked for here on the CPU) ------------------


def _mixed_params() -> list[SamplingParams]:
    return [SamplingParams(max_tokens=N),
            SamplingParams(max_tokens=N - 6, temperature=0.7, top_p=0.95, min_p=0.05,
                           repetition_penalty=1.1, seed=5),
            SamplingParams(max_tokens=N + 4, temperature=0.9, seed=11),
            SamplingParams(max_tokens=N - 2, repetition_penalty=1.3)]


def _run_batch(make_engine, batch_run_ahead: bool, eos: list[int] | None = None,
               cancel_at: int | None = None) -> tuple[list[list[int]], int, int, object]:
    """Four requests of mixed sampling decode; a short prompt joins at tick 12 (prefilled
    in one tick: the batch's started step is taken back), one row may be cancelled or end
    on an end token. The tokens, the ticks that had a batch step started ahead, the batch
    steps taken back, the engine."""
    engine = make_engine(max_concurrent=8, batch_run_ahead=batch_run_ahead, eos=eos)
    batch = testing.internals(engine).batch  # its roll-backs counted
    taken_back = 0
    real = batch.roll_back_ahead

    def roll_back_ahead() -> None:
        nonlocal taken_back
        taken_back += batch.ahead is not None and batch.cache is not None
        real()

    batch.roll_back_ahead = roll_back_ahead
    ps, params = prompts(4, seed=31), _mixed_params()
    streams = [engine.submit(prompt_tokens=p, params=q) for p, q in zip(ps, params, strict=True)]
    started = 0
    for tick in range(10_000):
        if not engine.has_work():
            break
        if tick == 12:
            streams.append(engine.submit(prompt_tokens=[7, 8, 9],
                                         params=SamplingParams(max_tokens=6)))
        if tick == cancel_at:
            streams[2].cancel()
        engine.step()
        now = testing.facts(engine)
        started += now.running_ahead and len(now.decode_rows) > 1
    return [s.tokens for s in streams], started, taken_back, engine


def test_a_batch_runs_ahead_with_the_same_tokens_as_without(tiny, make_engine):
    """Rows joining, leaving at their max_tokens, greedy, seeded and penalized: the same
    tokens with the batch's next step started early as without, and the greedy row's are
    mlx-lm's own."""
    ahead, started, taken_back, _ = _run_batch(make_engine, True)
    plain, none_started, _, _ = _run_batch(make_engine, False)
    assert started >= N // 2 and none_started == 0
    assert taken_back == 1  # the newcomer's join
    assert ahead == plain
    assert [len(t) for t in ahead] == [q.max_tokens for q in _mixed_params()] + [6]
    assert ahead[0] == reference_tokens(tiny.model, prompts(4, seed=31)[0], N)


def test_a_batch_running_ahead_wastes_no_step_when_rows_end_at_their_length(make_engine,
                                                                            monkeypatch):
    """A row about to reach max_tokens stops the batch from starting a step it would not
    use: three rows of 10, 20 and 20 tokens take 19 decode steps, as without run-ahead."""
    engine = make_engine(max_concurrent=4, batch_run_ahead=True)
    calls = _count_decodes(engine, monkeypatch)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n))
               for p, n in zip(prompts(3, seed=32), (10, N, N), strict=True)]
    run_to_end(engine)
    assert [len(s.tokens) for s in streams] == [10, N, N]
    assert len(calls) == N - 1


def test_an_end_token_or_a_cancel_rolls_the_batch_step_back_and_the_kv_kept_is_exact(
        make_engine):
    """A row that ends on an end token or is cancelled leaves a batch whose next step was
    already started: the step is taken back before its KV is cut out for the prefix cache,
    so the same prompt asked again is served from the cache with the same tokens."""
    penalized = _run_batch(make_engine, False)[0][3]
    for eos, cancel_at, leaver in (([penalized[7]], None, 3), (None, 9, 2)):
        ahead, started, taken_back, engine = _run_batch(make_engine, True, eos, cancel_at)
        plain, _, _, _ = _run_batch(make_engine, False, eos, cancel_at)
        assert started > 0 and taken_back == 2  # the leaver's and the newcomer's
        assert ahead == plain and len(ahead[leaver]) < _mixed_params()[leaver].max_tokens
        again = engine.submit(prompt_tokens=prompts(4, seed=31)[leaver],
                              params=_mixed_params()[leaver])
        run_to_end(engine)
        assert again.stats.cached_tokens > 0
        assert again.tokens[:len(ahead[leaver])] == ahead[leaver]


def test_a_batch_of_two_running_ahead_goes_back_to_solo_exactly(tiny, make_engine):
    """One of two rows is cancelled while their next step runs: the survivor gets its own
    cache back without the started step's key, decodes alone (running ahead as a lone
    sequence does) and its tokens are mlx-lm's."""
    engine = make_engine(max_concurrent=4, batch_run_ahead=True)
    a, b = prompts(2, seed=33)
    sa, sb = (engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N))
              for p in (a, b))
    for _ in range(6):
        engine.step()
    now = testing.facts(engine)
    assert now.running_ahead and now.batched
    sa.cancel()  # the first row: the survivor moves into its place
    engine.step()
    assert not testing.facts(engine).batched
    run_to_end(engine)
    assert sb.tokens == reference_tokens(tiny.model, b, N)
