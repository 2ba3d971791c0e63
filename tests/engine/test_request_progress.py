"""Per-request waiting read-outs: queue position while queued, prompt tokens read while
prefilling, gone once the first token is out; the same figures in request_rows()."""

from engine import SamplingParams
from tests.engine.conftest import run_to_end


def test_queue_positions_and_prefill_progress(make_engine):
    engine = make_engine(max_concurrent=1, prefill_burst=16, min_prefill_tokens=16,
                         max_token_budget=32)
    long_prompt = [5 + i % 50 for i in range(100)]
    first = engine.submit(prompt_tokens=long_prompt, params=SamplingParams(max_tokens=2))
    waiting = [engine.submit(prompt_tokens=[7, 8, 9, 10 + i], params=SamplingParams(max_tokens=2))
               for i in range(3)]
    background = engine.submit(prompt_tokens=[3, 4, 5], params=SamplingParams(max_tokens=2),
                               priority="background")
    late = engine.submit(prompt_tokens=[6, 7, 8], params=SamplingParams(max_tokens=2))
    engine.step()
    progress = engine.request_progress()
    assert progress[first.request_id].state == "prefilling"
    done = [progress[first.request_id].prompt_done]
    assert 0 < done[0] < len(long_prompt)
    # interactive ones in arrival order, then the background one (admitted last)
    assert [progress[s.request_id].queue_position for s in waiting] == [0, 1, 2]
    assert progress[late.request_id].queue_position == 3
    assert progress[background.request_id].queue_position == 4
    assert all(progress[s.request_id].state == "queued" for s in waiting)
    rows = {r.request_id: r for r in engine.request_rows()}
    assert rows[waiting[1].request_id].queue_position == 1
    assert rows[first.request_id].queue_position is None
    assert rows[first.request_id].prompt_done == done[0]
    while first.request_id in engine.request_progress():
        p = engine.request_progress()[first.request_id]
        done.append(p.prompt_done)
        assert 0.0 < p.prefill_fraction <= 1.0
        engine.step()
    assert done == sorted(done) and len(set(done)) > 2  # it moved forward, tick by tick
    assert first.tokens or first.finished  # gone from the read-out once it has a token
    run_to_end(engine)
    assert engine.request_progress() == {}
