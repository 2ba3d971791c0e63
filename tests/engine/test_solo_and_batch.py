"""Solo fast path and batched mode produce exactly mlx-lm's greedy tokens."""

from engine import SamplingParams, testing
from tests.engine.conftest import prompts, reference_tokens, run_to_end

N = 24


def test_solo_path_equals_mlx_lm_generate(tiny, make_engine):
    engine = make_engine()
    for prompt in prompts(4):
        stream = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=N))
        run_to_end(engine)
        assert stream.tokens == reference_tokens(tiny.model, prompt, N)
        assert stream.finish_reason == "length"
    assert not any(t.batched for t in engine.telemetry())  # one at a time: never batched


def test_batch_of_eight_equals_each_solo_run(tiny, make_engine):
    engine = make_engine(max_concurrent=8)
    ps = prompts(8)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N)) for p in ps]
    run_to_end(engine)
    for p, s in zip(ps, streams, strict=True):
        assert s.tokens == reference_tokens(tiny.model, p, N)
    ticks = engine.telemetry()
    assert max(t.decode_rows for t in ticks) == 8
    assert all(t.batched for t in ticks if t.decode_rows >= 2)


def test_late_arrival_joins_next_tick_and_running_cache_is_promoted(tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    first, second = prompts(2, seed=7)
    s1 = engine.submit(prompt_tokens=first, params=SamplingParams(max_tokens=N))
    for _ in range(5):
        engine.step()
    # solo fast path; the first tick gave two tokens (prefill's and a decode step's)
    assert len(s1.tokens) == 6 and not engine.telemetry()[-1].batched
    s2 = engine.submit(prompt_tokens=second, params=SamplingParams(max_tokens=N))
    engine.step()  # the very next tick: prefill the newcomer and decode both, batched
    tick = engine.telemetry()[-1]
    assert tick.decode_rows == 2 and tick.batched
    assert len(s1.tokens) == 7 and len(s2.tokens) == 2
    run_to_end(engine)
    assert s1.tokens == reference_tokens(tiny.model, first, N)
    assert s2.tokens == reference_tokens(tiny.model, second, N)
    # Promotion moved the first cache into the batch: its prompt was never run again.
    prefilled = sum(t.prefill_tokens for t in engine.telemetry())
    assert prefilled == len(first) + len(second)


def test_batch_shrinks_back_to_solo_path(tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    a, b = prompts(2, seed=3)
    sa = engine.submit(prompt_tokens=a, params=SamplingParams(max_tokens=4))
    sb = engine.submit(prompt_tokens=b, params=SamplingParams(max_tokens=N))
    run_to_end(engine)
    ticks = engine.telemetry()
    assert any(t.batched for t in ticks)
    assert ticks[-1].decode_rows == 1 and not ticks[-1].batched  # back on the solo path
    assert sa.tokens == reference_tokens(tiny.model, a, 4)
    assert sb.tokens == reference_tokens(tiny.model, b, N)


def test_staggered_arrivals_and_departures_keep_every_sequence_exact(tiny, make_engine):
    engine = make_engine(max_concurrent=6, prefill_burst=8)
    ps = prompts(10, seed=11)
    lengths = [5, 30, 12, 3, 20, 9, 16, 1, 25, 7]
    streams = []
    for i, (p, n) in enumerate(zip(ps, lengths, strict=True)):
        streams.append(engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n)))
        for _ in range(i % 3 + 1):
            engine.step()
    run_to_end(engine)
    for p, n, s in zip(ps, lengths, streams, strict=True):
        assert s.tokens == reference_tokens(tiny.model, p, n), s.request_id


def test_a_burst_of_prompts_is_prefilled_in_shared_passes_and_stays_exact(tiny, make_engine,
                                                                         monkeypatch):
    from engine.model_runner import ModelRunner

    passes: list[list[int]] = []
    shared, ragged = ModelRunner.prefill_many, ModelRunner.ragged

    def spy(self, caches, chunks, **kw):
        passes.append([len(c) for c in chunks])
        return shared(self, caches, chunks, **kw)

    def spy_ragged(self, decode, tokens, chunks, logits):
        passes.append([len(piece) for _, piece in chunks])
        return ragged(self, decode, tokens, chunks, logits)

    monkeypatch.setattr(ModelRunner, "prefill_many", spy)
    monkeypatch.setattr(ModelRunner, "ragged", spy_ragged)
    engine = make_engine(max_concurrent=8)
    batch = [p + p[:5] for p in prompts(8, seed=11)]  # 6 .. 45 tokens: padding is needed
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N))
               for p in batch]
    run_to_end(engine)
    assert passes and max(len(p) for p in passes) >= 3  # several prompts per pass
    assert any(len(set(p)) > 1 for p in passes)  # of different lengths (padded, or ragged)
    for prompt, stream in zip(batch, streams, strict=True):
        assert stream.tokens == reference_tokens(tiny.model, prompt, N)


def test_group_prefill_shares_passes_only_when_padding_is_cheap():
    from engine.scheduler import group_prefill
    from engine.sequence import Sequence

    def seq(cached: int) -> Sequence:
        s = Sequence.__new__(Sequence)
        s.num_cached = cached
        return s

    a, b, c, d, e = seq(0), seq(0), seq(0), seq(0), seq(40)
    groups = group_prefill([(a, 100), (b, 90), (c, 10), (d, 95), (e, 64)])
    sizes = sorted([[n for _, n in g] for g in groups])
    # 100, 95, 90 share a pass; 10 would waste most of one; a prompt under way goes alone.
    assert sizes == [[10], [64], [100, 95, 90]]


def test_group_prefill_lets_short_histories_share_a_pass():
    from engine.scheduler import group_prefill
    from engine.sequence import Sequence

    def seq(cached: int) -> Sequence:
        s = Sequence.__new__(Sequence)
        s.num_cached = cached
        return s

    turns = [(seq(300), 20), (seq(280), 22), (seq(0), 21), (seq(5000), 19)]
    groups = group_prefill(turns, max_history=1000)
    sizes = sorted([sorted(n for _, n in g) for g in groups])
    # Three chats' next turns (restored histories of ~300 tokens) share one pass; copying
    # a 5,000-token history in and out would cost more than the pass it saves.
    assert sizes == [[19], [20, 21, 22]]


def test_turns_that_arrive_together_share_a_prefill_pass_and_stay_exact(tiny, make_engine,
                                                                       monkeypatch):
    engine = make_engine(max_concurrent=4)
    runner = testing.internals(engine).runner
    passes: list[int] = []
    real_one, real_many, real_ragged = runner.prefill, runner.prefill_many, runner.ragged
    monkeypatch.setattr(runner, "prefill",
                        lambda c, t, **kw: passes.append(1) or real_one(c, t, **kw))
    monkeypatch.setattr(runner, "prefill_many",
                        lambda cs, ts, **kw: passes.append(len(cs)) or real_many(cs, ts, **kw))
    monkeypatch.setattr(runner, "ragged", lambda d, t, cs, lg: passes.append(len(cs))
                        or real_ragged(d, t, cs, lg))
    chats = [prompts(4, seed=60 + i)[3] for i in range(3)]
    first = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N))
             for p in chats]
    run_to_end(engine)
    turns = [p + s.tokens + [9, 8, 7, 6] for p, s in zip(chats, first, strict=True)]
    passes.clear()
    second = [engine.submit(prompt_tokens=t, params=SamplingParams(max_tokens=N))
              for t in turns]
    run_to_end(engine)
    assert passes == [3]  # one forward pass for the three turns' new tokens
    for turn, stream in zip(turns, second, strict=True):
        assert stream.stats.cached_tokens == len(turn) - 5
        assert stream.tokens == reference_tokens(tiny.model, turn, N)


def _one_left_of_three(engine):
    """A long request (40 tokens) batched with two short ones (3), stepped until the short
    ones have left the batch: the long one's stream."""
    long = engine.submit(prompt_tokens=prompts(1, seed=70)[0], params=SamplingParams(max_tokens=40))
    short = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=3))
             for p in prompts(2, seed=71)]
    while not all(s.finish_reason for s in short):
        engine.step()
    engine.step()
    return long


def test_an_emptied_batchs_buffers_are_kept_while_work_runs_and_let_go_when_idle(
        tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    long = _one_left_of_three(engine)
    # the short ones left; the long one decodes alone again: the batch's buffers are kept
    now = testing.facts(engine)
    assert not now.batched and now.spare_batch_buffers and long.finish_reason is None
    late = engine.submit(prompt_tokens=prompts(3, seed=72)[2], params=SamplingParams(max_tokens=4))
    run_to_end(engine)
    assert not testing.facts(engine).spare_batch_buffers  # idle: let go
    assert late.tokens == reference_tokens(tiny.model, prompts(3, seed=72)[2], 4)
    assert long.tokens == reference_tokens(tiny.model, prompts(1, seed=70)[0], 40)


def test_an_emptied_batchs_buffers_go_when_the_kv_budget_has_no_room_for_them(
        tiny, make_engine):
    """Issue #46 item 14: kept while one reply went on alone, they were memory beyond the
    KV budget (810 MiB over a 720 MiB budget in a long session)."""
    per_token = make_engine().stats().kv_bytes_per_token
    # room for the three requests' shares (each: prompt, 40 tokens, a 256-token step), not
    # for the 4-row batch buffer beside the long one's
    engine = make_engine(max_concurrent=4, kv_budget_bytes=per_token * 1000)
    long = _one_left_of_three(engine)
    now = testing.facts(engine)
    assert not now.batched and long.finish_reason is None
    assert not now.spare_batch_buffers  # the buffers did not fit beside the long one's share
    run_to_end(engine)
    assert long.tokens == reference_tokens(tiny.model, prompts(1, seed=70)[0], 40)
