"""The tick's early hand-over (`EngineCore.step(hand_over=...)`, what the engine thread
passes): events that go out before the tick ends, where waiting would cost a client."""

from engine import SamplingParams, testing
from tests.engine.conftest import count_passes, prompts, reference_tokens, run_to_end

N = 8


def _step(engine, log) -> None:
    """One tick as the engine thread runs it: what the tick hands over early is logged and
    delivered, the rest delivered when it ends."""
    def hand_over(events):
        log.append(("early", [e.request_id for e in events]))
        testing.deliver(engine, events)

    testing.tick(engine, hand_over)


def test_first_token_is_handed_over_before_the_other_rows_decode(tiny, make_engine,
                                                                 monkeypatch):
    engine = make_engine(max_concurrent=4)
    a, b = prompts(2, seed=32)
    sa = engine.submit(prompt_tokens=a, params=SamplingParams(max_tokens=N))
    engine.step()
    log = count_passes(engine, monkeypatch)
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
    memory = testing.internals(engine).kv
    keep, keep_row = memory.keep_finished, memory.keep_row
    monkeypatch.setattr(memory, "keep_finished",
                        lambda seq, cache: log.append(("kept", seq.request_id))
                        or keep(seq, cache))
    # a batch row's KV is kept by its prompt's entry taking the row's new positions
    monkeypatch.setattr(memory, "keep_row",
                        lambda seq, cache, row: log.append(("kept", seq.request_id))
                        or keep_row(seq, cache, row))
    while short.finish_reason is None:
        log.clear()
        _step(engine, log)
    assert log == [("early", [short.request_id, long.request_id]), ("kept", short.request_id)]
    assert engine.stats().prefix_entries >= 1
    run_to_end(engine)
    assert short.tokens == reference_tokens(tiny.model, a, 3)
    assert long.tokens == reference_tokens(tiny.model, b, N)
