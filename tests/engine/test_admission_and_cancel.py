"""max_concurrent, FIFO queue with priority classes, max_queue backpressure, cancellation."""

import pytest

from engine import QueueFullError, SamplingParams, testing
from tests.engine.conftest import prompts, run_to_end


def test_max_concurrent_queues_the_rest_fifo(make_engine):
    engine = make_engine(max_concurrent=2)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=3 + i))
               for i, p in enumerate(prompts(5))]
    engine.step()
    st = engine.stats()
    assert (st.active, st.queued) == (2, 3)
    assert all(t.decode_rows <= 2 for t in engine.telemetry())
    run_to_end(engine)
    assert all(s.finish_reason == "length" for s in streams)
    assert max(t.decode_rows for t in engine.telemetry()) == 2
    queue_times = [s.stats.queue_s for s in streams]
    assert queue_times[2] > 0 and queue_times[2] <= queue_times[4]  # FIFO


def test_concurrency_limit_changes_at_run_time(make_engine):
    engine = make_engine(max_concurrent=1)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=20))
               for p in prompts(4)]
    engine.step()
    assert (engine.stats().active, engine.stats().queued) == (1, 3)
    engine.set_max_concurrent(3)
    engine.step()
    assert (engine.stats().active, engine.stats().queued) == (3, 1)
    engine.set_max_concurrent(1)  # lowering never evicts: the running ones finish
    engine.step()
    assert (engine.stats().active, engine.stats().queued) == (3, 1)
    run_to_end(engine)
    assert all(s.finish_reason == "length" for s in streams)
    assert engine.max_concurrent == 1
    for bad in (0, -1, 1.5, True, "2", 10_000):
        with pytest.raises(ValueError, match="max_concurrent"):
            engine.set_max_concurrent(bad)


def test_interactive_is_admitted_before_earlier_background(make_engine):
    engine = make_engine(max_concurrent=1)
    running = engine.submit(prompt_tokens=[1, 2], params=SamplingParams(max_tokens=3))
    bg = engine.submit(prompt_tokens=[3, 4], params=SamplingParams(max_tokens=3),
                       priority="background")
    fg = engine.submit(prompt_tokens=[5, 6], params=SamplingParams(max_tokens=3))
    run_to_end(engine)
    assert running.stats.ttft_s < fg.stats.ttft_s < bg.stats.ttft_s


def test_queue_beyond_max_queue_is_refused_at_once(make_engine):
    engine = make_engine(max_concurrent=1, max_queue=2)
    ok = [engine.submit(prompt_tokens=[i + 1], params=SamplingParams(max_tokens=2))
          for i in range(3)]  # one runs, two wait
    with pytest.raises(QueueFullError, match="queue full"):
        engine.submit(prompt_tokens=[9], params=SamplingParams(max_tokens=2))
    run_to_end(engine)
    assert all(s.finish_reason == "length" for s in ok)
    engine.submit(prompt_tokens=[9], params=SamplingParams(max_tokens=2))  # room again


def test_cancel_running_frees_its_row_and_lets_a_queued_one_in(make_engine):
    engine = make_engine(max_concurrent=2)
    a, b, c = (engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=50))
               for p in prompts(3))
    for _ in range(3):
        engine.step()
    assert engine.telemetry()[-1].decode_rows == 2 and not c.tokens
    engine.cancel(a.request_id)
    engine.step()  # the next tick: a is gone, c is admitted and prefilled beside b's step
    assert a.finish_reason == "cancelled"
    n_a = len(a.tokens)
    if testing.facts(engine).ragged:
        # c's prompt and b's step share a pass (c's first token); then c decodes with b
        assert engine.telemetry()[-1].decode_rows == 1 and len(c.tokens) == 1
        engine.step()
    # else c's first token comes from its prefill pass, its second from the step with b
    assert engine.telemetry()[-1].decode_rows == 2 and len(c.tokens) == 2
    run_to_end(engine)
    assert len(a.tokens) == n_a and a.stats.generated_tokens == n_a
    assert b.finish_reason == c.finish_reason == "length"
    assert engine.stats().cancelled == 1


def test_cancel_queued_request(make_engine):
    engine = make_engine(max_concurrent=1)
    a = engine.submit(prompt_tokens=[1, 2, 3], params=SamplingParams(max_tokens=5))
    b = engine.submit(prompt_tokens=[4, 5, 6], params=SamplingParams(max_tokens=5))
    engine.step()
    b.cancel()
    run_to_end(engine)
    assert (a.finish_reason, b.finish_reason, b.tokens) == ("length", "cancelled", [])
    assert b.stats.ttft_s is None


def test_background_backlog_never_fills_the_queue_for_interactive(make_engine):
    engine = make_engine(max_concurrent=1, max_queue=3)
    background = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=2),
                                priority="background") for p in prompts(4)]
    with pytest.raises(QueueFullError):  # 1 slot + 3 waiting: background is full ...
        engine.submit(prompt_tokens=[1, 2], priority="background")
    chats = [engine.submit(prompt_tokens=[5, i], params=SamplingParams(max_tokens=2))
             for i in range(4)]  # ... but chats still get in, up to their own queue
    with pytest.raises(QueueFullError):
        engine.submit(prompt_tokens=[7, 8])
    run_to_end(engine)
    assert all(s.finish_reason == "length" for s in background + chats)
