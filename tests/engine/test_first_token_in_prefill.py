"""A prompt's first token is sampled from the prefill pass that runs its last token."""

from engine import SamplingParams
from engine.model_runner import output_head
from engine.worker import apply
from tests.engine.conftest import prompts, reference_tokens, run_to_end

N = 8


def _count_passes(engine, monkeypatch) -> list[str]:
    runner, log = engine._core.runner, []
    one, many, decode = runner.prefill, runner.prefill_many, runner.decode
    monkeypatch.setattr(runner, "prefill",
                        lambda c, t, **kw: log.append("prefill") or one(c, t, **kw))
    monkeypatch.setattr(runner, "prefill_many",
                        lambda cs, ts, **kw: log.append("prefill") or many(cs, ts, **kw))
    monkeypatch.setattr(runner, "decode", lambda c, t: log.append("decode") or decode(c, t))
    return log


def _step(engine, log) -> None:
    """One tick as the engine thread runs it: what the tick hands over early is logged and
    delivered, the rest delivered when it ends."""
    def hand_over(events):
        log.append(("early", [e.request_id for e in events]))
        engine._deliver(events)

    apply(engine._core, engine._inbox.drain())
    engine._deliver(engine._core.step(hand_over=hand_over))


def test_a_next_turn_costs_one_forward_pass_and_stays_exact(tiny, make_engine, monkeypatch):
    engine = make_engine()
    prompt = prompts(4, seed=31)[3]
    first = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=N))
    run_to_end(engine)
    turn = prompt + first.tokens + [5, 6, 7]
    log = _count_passes(engine, monkeypatch)
    nxt = engine.submit(prompt_tokens=turn, params=SamplingParams(max_tokens=1))
    run_to_end(engine)
    assert nxt.stats.cached_tokens == len(turn) - 4  # the last reply token and 3 new ones
    assert log == ["prefill"]  # one pass: the new tokens and the first output token
    assert nxt.tokens == reference_tokens(tiny.model, turn, 1)


def test_first_token_is_handed_over_before_the_other_rows_decode(tiny, make_engine,
                                                                 monkeypatch):
    engine = make_engine(max_concurrent=4)
    a, b = prompts(2, seed=32)
    sa = engine.submit(prompt_tokens=a, params=SamplingParams(max_tokens=N))
    engine.step()
    log = _count_passes(engine, monkeypatch)
    sb = engine.submit(prompt_tokens=b, params=SamplingParams(max_tokens=N))
    _step(engine, log)
    assert log == ["prefill", ("early", [sb.request_id]), "decode"]
    assert len(sb.tokens) == 2  # the prefill's token, then the decode step's
    run_to_end(engine)
    assert sa.tokens == reference_tokens(tiny.model, a, N)
    assert sb.tokens == reference_tokens(tiny.model, b, N)


def test_a_ticks_tokens_are_handed_over_before_finished_rows_kv_is_kept(tiny, make_engine,
                                                                      monkeypatch):
    """Rows that finish leave after the tick's tokens (their last ones included) are handed
    over: copying their KV out for the prefix cache does not delay them."""
    engine = make_engine(max_concurrent=4)
    a, b = prompts(2, seed=35)
    short = engine.submit(prompt_tokens=a, params=SamplingParams(max_tokens=3))
    long = engine.submit(prompt_tokens=b, params=SamplingParams(max_tokens=N))
    log: list = []
    memory = engine._core.memory
    keep = memory.keep_finished
    monkeypatch.setattr(memory, "keep_finished",
                        lambda seq, cache: log.append(("kept", seq.request_id))
                        or keep(seq, cache))
    while short.finish_reason is None:
        log.clear()
        _step(engine, log)
    assert log == [("early", [short.request_id, long.request_id]), ("kept", short.request_id)]
    assert engine.stats().prefix_entries >= 1
    run_to_end(engine)
    assert short.tokens == reference_tokens(tiny.model, a, 3)
    assert long.tokens == reference_tokens(tiny.model, b, N)


def test_a_model_with_an_unknown_head_gets_the_same_tokens(tiny, make_engine):
    assert output_head(tiny.model) is not None  # mlx-lm's llama: the head is found
    engine = make_engine(max_concurrent=8)
    engine._core.runner.head = None  # the generic path: every position's logits
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
