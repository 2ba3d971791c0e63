"""Per-request and aggregated stats equal what was actually produced."""

from engine import SamplingParams
from tests.engine.conftest import prompts, run_to_end


def test_counts_equal_tokens_produced(make_engine):
    engine = make_engine(max_concurrent=3)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=5 + 3 * i))
               for i, p in enumerate(prompts(6))]
    engine.step()
    engine.step()
    streams[5].cancel()
    run_to_end(engine)
    produced = sum(len(s.tokens) for s in streams)
    st = engine.stats()
    assert st.total_generated_tokens == produced
    assert sum(t.tokens_out for t in engine.telemetry()) == produced
    assert st.total_prompt_tokens == sum(t.prefill_tokens for t in engine.telemetry())
    assert (st.completed, st.cancelled, st.failed) == (5, 1, 0)
    assert (st.active, st.queued) == (0, 0)
    for s in streams:
        r = s.stats
        assert r.generated_tokens == len(s.tokens)
        assert r.prompt_tokens == len(s.prompt_tokens)
        assert r.finish_reason == s.finish_reason
        assert r.queue_s >= 0 and r.e2e_s >= r.queue_s
        if s.tokens:
            assert r.queue_s <= r.ttft_s <= r.e2e_s
            assert r.decode_s >= 0
    assert st.mean_batch_size > 1 and st.tokens_per_s > 0 and st.peak_memory_bytes > 0
    finished = {r.request_id for r in engine.finished_requests()}
    assert finished == {s.request_id for s in streams}


def test_tick_telemetry_records_the_tick(make_engine):
    engine = make_engine(max_concurrent=2)
    engine.submit(prompt_tokens=list(range(30)), params=SamplingParams(max_tokens=3))
    engine.step()
    tick = engine.telemetry()[-1]
    assert tick.prefill_tokens == 30 and tick.prefill_seqs == 1 and tick.decode_rows == 1
    # the prefill pass's first token, then a decode step's
    assert tick.tokens_out == 2 and 0 < tick.forward_s <= tick.step_s
    assert tick.budget >= tick.prefill_tokens + tick.decode_rows


def test_request_rows_show_live_states(make_engine):
    engine = make_engine(max_concurrent=1)
    engine.submit(prompt_tokens=[1, 2, 3], params=SamplingParams(max_tokens=9), tag="tab-1")
    engine.submit(prompt_tokens=[4, 5], params=SamplingParams(max_tokens=9), tag="sim")
    engine.step()
    rows = {r.tag: r for r in engine.request_rows()}
    assert rows["tab-1"].state == "generating" and rows["tab-1"].generated_tokens == 2
    assert rows["sim"].state == "queued" and rows["sim"].generated_tokens == 0


def test_gaps_between_tokens_show_a_stall(make_engine):
    """Issue #26: the largest gap between a stream's tokens (and its p99) over the window,
    and how long a running stream has waited now. A pause of the engine is a stall."""
    import time

    engine = make_engine(max_concurrent=2)
    stream = engine.submit(prompt_tokens=list(range(20)), params=SamplingParams(max_tokens=12))
    for _ in range(4):
        engine.step()
    quick = engine.stats()
    assert 0 < quick.itl_p99_s <= quick.itl_max_s < 0.2
    time.sleep(0.25)  # nothing runs: the stream stalls
    assert engine.stats().stall_s >= 0.25
    run_to_end(engine)
    st = engine.stats()
    assert st.itl_max_s >= 0.25 > st.itl_p99_s or st.itl_p99_s == st.itl_max_s
    assert len(stream.tokens) == 12 and st.stall_s == 0.0  # nothing running now
