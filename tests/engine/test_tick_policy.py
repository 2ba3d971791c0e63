"""Decode first, budgeted chunked prefill, burst limit, priorities, adaptive budget."""

from engine import EngineConfig, SamplingParams, testing
from engine.scheduler import BudgetController
from tests.engine.conftest import prompts, run_to_end


def test_long_prompt_is_chunked_and_never_freezes_decoding(make_engine):
    engine = make_engine(max_concurrent=4, prefill_burst=32)
    decoders = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=60))
                for p in prompts(2, seed=3)]
    for _ in range(3):
        engine.step()
    long = engine.submit(prompt_tokens=list(range(200)), params=SamplingParams(max_tokens=5))
    counts = [len(d.tokens) for d in decoders]
    prefill_ticks = 0
    while not long.tokens:
        engine.step()
        tick = engine.telemetry()[-1]
        prefill_ticks += 1
        assert tick.prefill_tokens <= 32  # the burst limit
        now = [len(d.tokens) for d in decoders]
        assert all(b == a + 1 for a, b in zip(counts, now, strict=True))  # nobody waited
        counts = now
    assert prefill_ticks >= 199 // 32  # it really was split up
    run_to_end(engine)


def test_first_token_priority_and_interactive_before_background(make_engine):
    engine = make_engine(max_concurrent=4, prefill_burst=16, min_prefill_tokens=16,
                         max_token_budget=20)
    bg = engine.submit(prompt_tokens=list(range(100)), params=SamplingParams(max_tokens=2),
                       priority="background")
    engine.step()  # background starts prefilling (nobody else is there)
    fg = engine.submit(prompt_tokens=list(range(40)), params=SamplingParams(max_tokens=2),
                       priority="interactive")
    while not fg.tokens:
        engine.step()
    assert not bg.tokens  # the interactive prompt took the prefill budget first
    run_to_end(engine)
    assert bg.finish_reason == fg.finish_reason == "length"


def test_budget_shrinks_when_ticks_run_long_and_grows_when_short():
    cfg = EngineConfig(target_step_s=0.1, decode_slack=2.0, max_token_budget=1024,
                       min_prefill_tokens=8, ewma_alpha=0.5)
    ctl = BudgetController(cfg)
    assert ctl.budget(decode_rows=0) == 1024  # nobody decoding: prefill at full speed
    start = ctl.budget(decode_rows=4) - 4
    for _ in range(5):
        ctl.observe(4, 0.04, 0, 0.0, 0.04)  # decode-only ticks of 40 ms
    assert ctl.target_s == 0.1  # the floor: 2 x 40 ms is less than target_step_s
    for _ in range(3):
        ctl.observe(4, 0.04, ctl.budget(4) - 4, 0.2, 0.24)  # prefill ticks overshoot
    shrunk = ctl.budget(decode_rows=4) - 4
    assert shrunk < start
    for _ in range(200):
        ctl.observe(4, 0.04, ctl.budget(4) - 4, 0.5, 0.54)  # far too slow, every time
    assert ctl.budget(decode_rows=4) == 4 + 8  # the minimum: prompts still progress
    for _ in range(200):
        ctl.observe(4, 0.04, ctl.budget(4) - 4, 0.01, 0.05)  # cheap: half the target
    assert ctl.budget(decode_rows=4) == 1024  # grown to the cap (all the room there is)
    for _ in range(20):
        ctl.observe(4, 0.04, 3, 0.001, 0.041)  # allowance unused: no evidence, no growth
    assert ctl.budget(decode_rows=4) == 1024
    for _ in range(10):
        ctl.observe(4, 0.3, 0, 0.0, 0.3)  # decode got slow: the target follows it
    assert abs(ctl.target_s - 0.6) < 0.01


def test_engine_budget_adapts_from_measured_step_times(make_engine):
    engine = make_engine(max_concurrent=4, prefill_burst=64, target_step_s=0.001)
    for p in prompts(2):
        engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=80))
    engine.submit(prompt_tokens=[i % 250 for i in range(300)], params=SamplingParams(max_tokens=2))
    run_to_end(engine)
    budgets = {t.budget for t in engine.telemetry() if t.decode_rows}
    assert len(budgets) > 1  # it moved with the measurements


def test_background_decoders_leave_prompts_a_larger_share():
    cfg = EngineConfig(target_step_s=0.1, decode_slack=2.0, background_slack=8.0,
                       max_token_budget=1024, min_prefill_tokens=8, ewma_alpha=0.5)
    ctl = BudgetController(cfg)
    for _ in range(10):
        ctl.observe(4, 0.05, 0, 0.0, 0.05)  # decode-only ticks of 50 ms
    assert ctl.target_for(True) == 0.1 and abs(ctl.target_for(False) - 0.4) < 1e-9
    interactive_start = ctl.budget(4, interactive=True)
    assert ctl.budget(4, interactive=False) == 1024  # throughput first: all the room there is
    for _ in range(50):  # background ticks that run 4x over their target shrink its allowance
        ctl.observe(4, 0.05, ctl.budget(4, False) - 4, 1.55, 1.6, interactive=False)
    background = ctl.budget(4, interactive=False)
    assert background < 1024
    assert ctl.budget(4, interactive=True) == interactive_start  # the other class's is its own
    for _ in range(200):  # both at equilibrium with the same cost per token: 8x vs 2x the tick
        ctl.observe(4, 0.05, ctl.budget(4, False) - 4, (ctl.budget(4, False) - 4) * 1e-3,
                    0.05 + (ctl.budget(4, False) - 4) * 1e-3, interactive=False)
        ctl.observe(4, 0.05, ctl.budget(4, True) - 4, (ctl.budget(4, True) - 4) * 1e-3,
                    0.05 + (ctl.budget(4, True) - 4) * 1e-3, interactive=True)
    assert ctl.budget(4, False) > 3 * ctl.budget(4, True)


def test_a_prompt_gets_more_per_tick_when_only_background_work_decodes(make_engine):
    def first_chunk(priority: str) -> int:
        engine = make_engine(max_concurrent=4, prefill_burst=512)
        for p in prompts(2, seed=3):
            engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=40),
                          priority=priority)
        for _ in range(3):
            engine.step()
        engine.submit(prompt_tokens=[i % 250 for i in range(400)],
                      params=SamplingParams(max_tokens=2), priority="background")
        engine.step()
        chunk = engine.telemetry()[-1].prefill_tokens
        run_to_end(engine)
        return chunk

    assert first_chunk("interactive") <= 64  # chat streams are protected: small slices
    assert first_chunk("background") == 400  # nobody interactive: the whole prompt at once


def test_a_burst_first_tick_at_full_room_leaves_the_allowance_alone():
    cfg = EngineConfig(target_step_s=0.1, background_slack=8.0, max_token_budget=1024,
                       min_prefill_tokens=8, ewma_alpha=0.5)
    ctl = BudgetController(cfg)
    for _ in range(5):
        ctl.observe(4, 0.05, 0, 0.0, 0.05)  # decode-only ticks of 50 ms: target 0.4 s
    before = ctl.budget(4, interactive=False)
    for _ in range(20):  # bursts whose first tick (nobody decoding at plan time) runs long
        ctl.observe(14, 0.05, 1000, 5.0, 5.05, interactive=False, budgeted=False)
    assert ctl.budget(4, interactive=False) == before
    ctl.observe(14, 0.05, 1000, 5.0, 5.05, interactive=False)  # a budgeted tick as long
    assert ctl.budget(4, interactive=False) < before


def test_engine_tells_the_budget_which_ticks_were_planned_under_the_allowance(
        make_engine, monkeypatch):
    engine = make_engine(max_concurrent=8, prefill_burst=8)
    seen: list[tuple[int, int, bool]] = []
    budget = testing.internals(engine).budget
    observe = budget.observe

    def spy(rows, decode_s, prefill_tokens, prefill_s, step_s, interactive=True,
            budgeted=True):
        seen.append((rows, prefill_tokens, budgeted))
        observe(rows, decode_s, prefill_tokens, prefill_s, step_s, interactive, budgeted)

    monkeypatch.setattr(budget, "observe", spy)
    engine.submit(prompt_tokens=list(range(1, 9)), params=SamplingParams(max_tokens=6))
    engine.submit(prompt_tokens=list(range(1, 21)), params=SamplingParams(max_tokens=6))
    run_to_end(engine)
    # Tick 1: nobody decodes at plan time; the short prompt finishes and decodes at once
    # (in a pass of its own after the prefill pass; in the next tick when the prompts share
    # one ragged pass).
    rows = 0 if testing.facts(engine).ragged else 1
    assert seen[0] == (rows, 8 + 8, False)  # the short prompt whole, 8 of the long one
    # Tick 2: the long prompt's next chunk is planned with a decoder present.
    assert seen[1][1] > 0 and seen[1][2] is True


def _waiting(n: int, t_submit: float, priority: str = "interactive"):
    from engine.sequence import Priority, Sequence

    return Sequence(request_id=f"r{t_submit}", prompt_tokens=list(range(n)),
                    params=SamplingParams(), priority=Priority.parse(priority), text=None,
                    seed=0, sampler=None, t_submit=t_submit)


def test_prompts_of_the_decoders_burst_run_at_full_size_later_ones_by_the_allowance():
    """A prompt submitted before the first token of every interactive decoder came with
    them (a burst opened at once): it is prefilled at full size, so the streams that started
    first wait once, not a little in every tick. One submitted later is held to the
    allowance, as is everything when the burst rule is off (streaming_since None)."""
    from engine.scheduler import Scheduler

    cfg = EngineConfig(max_concurrent=8, prefill_burst=100, min_prefill_tokens=16,
                       max_token_budget=400)
    sched = Scheduler(cfg)
    allowance = sched.budget.budget(decode_rows=2) - 2  # interactive decoders: 64 tokens
    mates = [_waiting(150, t_submit=1.0 + i) for i in range(3)]
    late = _waiting(150, t_submit=20.0)
    sched.prefilling = [*mates, late]
    plan = sched.plan(decode_rows=2, interactive=True, streaming_since=10.0)
    chunks = {seq.request_id: n for seq, n in plan.prefill}
    assert [chunks[s.request_id] for s in mates] == [100, 100, 100]  # prefill_burst each
    assert late.request_id not in chunks  # the allowance was spent before it
    assert plan.beyond_allowance  # such a tick does not teach the allowance
    held = sched.plan(decode_rows=2, interactive=True, streaming_since=None)
    assert held.num_prefill_tokens == allowance
    sched.prefilling = [late]
    alone = sched.plan(decode_rows=2, interactive=True, streaming_since=10.0)
    assert alone.num_prefill_tokens == allowance and not alone.beyond_allowance


def test_a_burst_is_prefilled_together_before_its_first_streams_decode_on(make_engine):
    """Eight chats opened at once, more prompt than one tick holds: the first ones stream
    after the first tick and the rest are prefilled at full size next, not at the
    interactive allowance (64 tokens a tick here: 5 more ticks for the 280 left)."""
    import random

    rng = random.Random(5)
    engine = make_engine(max_concurrent=8, prefill_burst=64, max_token_budget=200,
                         min_prefill_tokens=16)
    streams = [engine.submit(prompt_tokens=[rng.randrange(256) for _ in range(60)],
                             params=SamplingParams(max_tokens=20)) for _ in range(8)]
    engine.step()
    assert 0 < sum(bool(s.tokens) for s in streams) < 8
    ticks = 1
    while not all(s.tokens for s in streams):
        engine.step()
        ticks += 1
    assert ticks <= 3
    run_to_end(engine)


def test_turns_with_their_history_in_cache_run_one_a_tick_while_chats_stream():
    """A chat's next turn (its history in cache, so its chunk is a forward pass of its
    own) is not part of a burst, and only one such turn runs a tick while interactive rows
    decode: four turns arriving together stall the streams four times one pass, not once
    four passes. With nobody decoding, or only background rows, they all run at once."""
    from engine.scheduler import Scheduler

    cfg = EngineConfig(max_concurrent=8, prefill_burst=100, min_prefill_tokens=16,
                       max_token_budget=400)
    sched = Scheduler(cfg)
    turns = [_waiting(220, t_submit=1.0 + i) for i in range(4)]
    for seq in turns:
        seq.num_cached = seq.cached_tokens = 200  # 20 new tokens after 200 from the cache
    fresh = _waiting(30, t_submit=2.5)
    split = _waiting(300, t_submit=2.7)  # a burst's prompt, its first 200 run last tick
    split.num_cached = 200
    sched.prefilling = [*turns, fresh, split]
    plan = sched.plan(decode_rows=3, interactive=True, streaming_since=10.0)
    chunks = {seq.request_id: n for seq, n in plan.prefill}
    assert chunks == {turns[0].request_id: 20, fresh.request_id: 30, split.request_id: 100}
    idle = sched.plan(decode_rows=0, interactive=False)
    assert {seq.request_id for seq, _ in idle.prefill} == {s.request_id for s in sched.prefilling}
    background = sched.plan(decode_rows=3, interactive=False, streaming_since=None)
    assert len([s for s, _ in background.prefill if s in turns]) == 4


def test_with_shared_passes_interactive_ticks_aim_at_a_multiple_of_a_decode_tick() -> None:
    """When a tick's rows and chunks share one pass, a chunk costs only its tokens: the
    interactive allowance starts at its minimum (shared_min_prefill_tokens) and steers ticks
    towards shared_slack x a decode-only tick (no 0.2 s floor); background ticks keep their
    own target and minimum."""
    cfg = EngineConfig(min_prefill_tokens=16, shared_min_prefill_tokens=8, shared_slack=1.5)
    shared, apart = BudgetController(cfg, shared_passes=True), BudgetController(cfg)
    assert shared.allowance[True] == 8 and apart.allowance[True] == 64
    assert shared.budget(decode_rows=4, interactive=False) - 4 == cfg.max_token_budget - 4
    for b in (shared, apart):
        b.observe(decode_rows=6, decode_s=0.024, prefill_tokens=0, prefill_s=0.0, step_s=0.024)
    assert shared.target_for(interactive=True) == 1.5 * shared.decode_s
    assert apart.target_for(interactive=True) == cfg.target_step_s  # 0.2 s > 2 x 24 ms
    assert shared.target_for(interactive=False) == apart.target_for(interactive=False)
    # cheap ticks let the allowance grow, dear ones shrink it
    for _ in range(10):
        shared.observe(6, 0.0, round(shared.allowance[True]), 0.0, step_s=0.026)
    grown = shared.allowance[True]
    assert grown > 8
    for _ in range(10):
        shared.observe(6, 0.0, round(shared.allowance[True]), 0.0, step_s=0.080)
    assert shared.allowance[True] < grown
    for _ in range(30):  # never below the floor
        shared.observe(6, 0.0, round(shared.allowance[True]), 0.0, step_s=0.5)
    assert shared.allowance[True] == 8 and shared.budget(decode_rows=6) == 6 + 8


def test_with_shared_passes_a_short_prompt_is_split_while_chats_stream() -> None:
    """whole_prompt_tokens keeps a next turn in one tick when passes are apart (a split
    costs everyone another pass); with shared passes it is split by the allowance."""
    from engine.scheduler import Scheduler

    cfg = EngineConfig(min_prefill_tokens=16, shared_min_prefill_tokens=8,
                       whole_prompt_tokens=64)
    for shared, want in ((False, 40), (True, 8)):
        sched = Scheduler(cfg, shared_passes=shared)
        sched.prefilling = [_waiting(40, t_submit=5.0)]
        plan = sched.plan(decode_rows=4, interactive=True, streaming_since=1.0)
        assert plan.num_prefill_tokens == want, shared
        # nobody decoding: the whole prompt either way
        assert sched.plan(decode_rows=0).num_prefill_tokens == 40


def test_with_shared_passes_a_long_prompt_keeps_a_pace() -> None:
    """At shared_slack x a decode tick a long prompt would crawl (a 2,000-token prompt beside
    8 streams took 3x its time alone); its chunks are instead sized so that the decode work
    beside them delays its first token by about prefill_delay_s in all, and never so large
    that a tick outgrows target_step_s. A short prompt (a next turn) keeps the allowance.
    With passes apart there is no pace (ticks already aim at target_step_s)."""
    from engine.scheduler import Scheduler

    cfg = EngineConfig(shared_min_prefill_tokens=8, prefill_delay_s=0.5, target_step_s=0.2,
                       prefill_burst=512)
    sched, apart = Scheduler(cfg, shared_passes=True), Scheduler(cfg)
    for s in (sched, apart):
        s.budget.observe(8, 0.0, 0, 0.0, step_s=1 / 32)  # a decode-only tick: 31 ms
        s.budget.observe(8, 0.0, 32, 0.0, step_s=2 / 32)  # a prefill token: ~1 ms
    assert sched.budget.token_s == 1 / 1024 and apart.budget.token_s is None
    long = _waiting(2000, t_submit=5.0)
    sched.prefilling = apart.prefilling = [long]
    plan = sched.plan(decode_rows=8, interactive=True, streaming_since=1.0)
    # 2000 x 31 ms / 0.5 s = 125 tokens a tick: 16 ticks of ~150 ms, ~0.5 s of decode in all
    assert plan.num_prefill_tokens == 125 and plan.budget == 8 + 125
    assert plan.beyond_allowance  # its length teaches the allowance nothing
    assert apart.plan(decode_rows=8, interactive=True,
                      streaming_since=1.0).num_prefill_tokens == round(
        apart.budget.allowance[True])
    # the pace is fixed by the whole prompt: its last chunk is what is left of it
    long.num_cached = 1950
    assert sched.plan(decode_rows=8, interactive=True).num_prefill_tokens == 50
    # a prompt whose pace would outgrow a target_step_s tick gets what fits: (0.2 - 0.031) / ~1 ms
    sched.prefilling = [_waiting(8000, t_submit=6.0)]
    assert sched.plan(decode_rows=8, interactive=True).num_prefill_tokens == 172
    # a next turn's 40 new tokens: a pace of 3 is below the allowance, which stays
    sched.prefilling = [_waiting(40, t_submit=7.0)]
    assert sched.plan(decode_rows=8, interactive=True).num_prefill_tokens == 8
    # nobody decoding, or only background rows: no pace, as before
    sched.prefilling = [_waiting(2000, t_submit=8.0)]
    assert sched.plan(decode_rows=0).num_prefill_tokens == 512
    plan = sched.plan(decode_rows=8, interactive=False)
    assert not plan.beyond_allowance and plan.budget == sched.budget.budget(8, interactive=False)


def test_an_image_larger_than_the_allowance_runs_whole_and_alone_in_its_tick():
    """Gemma 4's image tokens attend both ways, so an image is never split
    (Sequence.whole_images): a chunk starting at one runs to its end past the tick's
    allowance. Its whole size counts against the tick: no burst mate and no short prompt is
    prefilled beside it (each would be without it), and the tick is marked beyond the
    allowance (it does not teach the budget). A chunk of text that stops before an image
    leaves room for the others as before."""
    from engine.scheduler import Scheduler
    from engine.vision.prompt import VisionPrompt

    cfg = EngineConfig(max_concurrent=8, prefill_burst=200, min_prefill_tokens=16,
                       max_token_budget=400)
    sched = Scheduler(cfg)
    allowance = sched.budget.budget(decode_rows=2) - 2  # interactive decoders: 64 tokens
    image = _waiting(160, t_submit=20.0)  # sent after the streams began: held to 64
    ids = list(range(160))
    image.vision = VisionPrompt(ids, ids, {}, images_end=152, blocks=((2, 152),))
    image.prompt_embeddings = object()  # its vision pass has run
    image.num_cached = 2  # the text before the image is prefilled: the next chunk is it
    # the streams' burst (full size, beyond the allowance), after the image in line
    mate = _waiting(150, t_submit=2.0, priority="background")
    short = _waiting(10, t_submit=3.0, priority="background")
    sched.prefilling = [image, mate, short]
    plan = sched.plan(decode_rows=2, interactive=True, streaming_since=10.0)
    assert [(seq.request_id, n) for seq, n in plan.prefill] == [(image.request_id, 150)]
    assert plan.num_prefill_tokens == 150 > allowance and plan.beyond_allowance
    sched.prefilling = [mate, short]  # without the image both run
    assert {s.request_id for s, _ in sched.plan(decode_rows=2, interactive=True,
                                                 streaming_since=10.0).prefill} == \
        {mate.request_id, short.request_id}
    image.num_cached = 0  # text first: the chunk stops before the image, the others run
    sched.prefilling = [image, mate, short]
    chunks = [(s.request_id, n) for s, n in sched.plan(decode_rows=2, interactive=True,
                                                       streaming_since=10.0).prefill]
    assert chunks[0] == (image.request_id, 2) and len(chunks) == 3
