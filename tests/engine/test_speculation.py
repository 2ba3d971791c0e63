"""Issue #31: speculative decoding inside the batch answers exactly as without it.

Drafts come from each row's own text (engine/drafting.py) and are checked in the row's pass
(engine/speculation.py): a lone row's input and drafts in one pass, a batch's rows' drafts
as segments of the ragged pass beside the other rows and prefill chunks. Greedy and seeded
requests must give the same tokens with speculation on as off, alone and in a batch, and
the drafts must really have been checked and (some) accepted, or the test proves nothing.
"""

from __future__ import annotations

import random

import pytest

from engine import SamplingParams
from engine.drafting import NgramDrafter
from engine.speculation import Speculation, accept_drawn
from tests.engine.conftest import drafting_pays, engine_on, native_quantized_tiny, run_to_end

# -- the drafter and the acceptance rule -------------------------------------------------


def test_drafter_proposes_what_followed_the_longest_recent_match() -> None:
    d = NgramDrafter([1, 2, 3, 4, 5, 9, 2, 3, 4, 6, 7, 2, 3], min_n=2, max_n=3)
    # "2 3" occurred twice before: the most recent (followed by 4 6 7) wins
    assert d.propose(3) == [4, 6, 7]
    d.extend([4])
    # "2 3 4" (3-gram) last followed by 6 7 2
    assert d.propose(3) == [6, 7, 2]
    assert d.propose(0) == []


def test_drafter_without_a_match_proposes_nothing() -> None:
    d = NgramDrafter([1, 2, 3, 4], min_n=2, max_n=4)
    assert d.propose(4) == []
    d.extend([1, 2])  # now "1 2" occurred before, followed by 3 4 1 2
    assert d.propose(2) == [3, 4]


def test_drafter_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="min_n"):
        NgramDrafter([], min_n=3, max_n=2)


def test_accept_drawn_takes_matches_and_the_first_difference() -> None:
    assert accept_drawn([5, 6, 7], [5, 6, 7, 8]) == [5, 6, 7, 8]  # all, plus one more
    assert accept_drawn([5, 6, 7], [5, 9, 7, 8]) == [5, 9]  # stops at the difference
    assert accept_drawn([5, 6, 7], [1, 6, 7, 8]) == [1]
    assert accept_drawn([], [4]) == [4]


class RowLike:
    """What Speculation.plan reads of a decoding row, without an engine."""

    def __init__(self, prompt: list[int], max_tokens: int = 100) -> None:
        self.prompt_tokens, self.num_prompt_tokens = prompt, len(prompt)
        self.output_tokens: list[int] = []
        self.matcher, self.spec, self.is_finished = None, None, False
        self.params = SamplingParams(max_tokens=max_tokens)
        self.drafted = self.accepted_drafts = 0

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_tokens)

    @property
    def num_tokens(self) -> int:
        return self.num_prompt_tokens + len(self.output_tokens)


def test_a_row_whose_drafts_fail_rests_and_comes_back() -> None:
    spec = Speculation("ngram", max_drafts=8)
    row = RowLike([1, 2, 3, 1, 2])
    assert spec.plan([row], 1000) == {0: [3, 1, 2]}

    def fail_until_it_rests() -> int:
        while row.spec.rest == 0:
            spec.checked(row, [3, 1], 0)
        return row.spec.rest

    first = fail_until_it_rests()
    assert first > 0 and spec.plan([row], 1000) == {}  # resting
    row.spec.rest = 0
    assert 0 in spec.plan([row], 1000)  # back, with a short draft
    assert fail_until_it_rests() == 2 * first  # failing again: a longer rest
    row.spec.rest = 0
    spec.checked(row, [3, 1], 2)
    assert row.spec.k > 2  # all accepted: asks for more
    assert fail_until_it_rests() == first  # its drafts held since: rests start short again


def test_costs_decide_the_draft_length() -> None:
    spec = Speculation("ngram", max_drafts=8)
    spec.costs.observe_plain(16, 0.048)  # a row's share: 3 ms
    spec.costs.observe_checked(16, 10, 0.048 + 10 * 0.004)  # a drafted position: 4 ms
    assert spec.costs.check(16).position_s == pytest.approx(0.004)
    rows = [RowLike([7, 8, 9, 7, 8]) for _ in range(16)]
    # a position costs more than a row's token is worth: nobody drafts at 16 rows, and
    # the batch runs ahead where the backend does
    assert spec.plan(rows, 1000) == {} and not spec.will_draft(rows)
    spec.costs.observe_plain(1, 0.010)  # alone, a step is 10 ms: drafting pays
    spec.costs.set_check(0.001, rows=1)
    lone = [RowLike([7, 8, 9, 7, 8])]
    assert spec.will_draft(lone) and spec.plan(lone, 1000) == {0: [9, 7, 8]}
    assert spec.costs.check(16).position_s == pytest.approx(0.004)  # each row count its own
    # a tick far slower than any number of positions explains (a kernel compiled on its
    # first use) is not taken as their cost
    spec.costs.observe_checked(16, 2, 0.048 + 0.600)
    assert spec.costs.check(16).position_s == pytest.approx(0.004)
    # a row whose own acceptance is too low for its positions rests
    low = RowLike([7, 8, 9, 7, 8])
    spec.row(low).hits, low.spec.trials = 0.3, 1.0  # 0.3 x 10 ms share < 4 ms
    spec.costs.set_check(0.004, rows=1)
    assert spec.plan([low], 1000) == {} and low.spec.rest > 0


# -- exactness -----------------------------------------------------------------------------

N = 40


@pytest.fixture(scope="module")
def qtiny():
    return native_quantized_tiny(seed=11)


def copy_prompt(seed: int, length: int = 24, repeats: int = 3) -> list[int]:
    """A prompt that repeats a random phrase: its continuation is easy to draft."""
    rng = random.Random(seed)
    phrase = [rng.randrange(0, 256) for _ in range(length)]
    return phrase * repeats + phrase[: length // 2]


def run(qtiny, speculative: str, prompts: list[list[int]], params: list[SamplingParams],
        stagger: bool = False, **config):
    engine = drafting_pays(engine_on(qtiny, speculative=speculative, **config))
    streams = []
    for p, sp in zip(prompts, params, strict=True):
        streams.append(engine.submit(prompt_tokens=p, params=sp))
        if stagger:
            for _ in range(3):
                engine.step()
    run_to_end(engine)
    for s in streams:
        assert s.finish_reason == "length", s.error
    return [list(s.tokens) for s in streams], [s.stats for s in streams], engine


def greedy(n: int = N) -> SamplingParams:
    return SamplingParams(max_tokens=n)


def seeded(seed: int, n: int = N) -> SamplingParams:
    return SamplingParams(max_tokens=n, temperature=0.8, top_p=0.9, seed=seed)


@pytest.mark.parametrize("kind", ["greedy", "seeded", "penalty"])
def test_alone_speculation_gives_the_same_tokens(qtiny, kind) -> None:
    params = {"greedy": greedy(), "seeded": seeded(3),
              "penalty": SamplingParams(max_tokens=N, temperature=0.7, seed=5,
                                        repetition_penalty=1.1)}[kind]
    for seed in range(3):
        prompt = [copy_prompt(seed)]
        off, _, _ = run(qtiny, "off", prompt, [params])
        on, stats, engine = run(qtiny, "ngram", prompt, [params])
        assert on == off
        assert stats[0].drafted_tokens > 0  # drafts were checked
    assert engine.stats().decode_row_steps > 0


def test_greedy_drafts_are_accepted_when_the_row_repeats(qtiny) -> None:
    """A random tiny model's greedy output falls into a loop: its drafts then hold."""
    accepted = 0
    for seed in range(4):
        _, stats, _ = run(qtiny, "ngram", [copy_prompt(seed)], [greedy(64)])
        accepted += stats[0].accepted_tokens
        if stats[0].accepted_tokens:
            assert stats[0].tokens_per_step > 1.0
    assert accepted > 0


@pytest.mark.parametrize("stagger", [False, True])
def test_in_a_batch_speculation_gives_the_same_tokens(qtiny, stagger) -> None:
    """Eight rows (greedy and seeded), together or joining while others decode (prefill
    chunks then share the rows' passes with their drafts), each equal to its run alone
    without speculation."""
    prompts = [copy_prompt(10 + i, length=8 + 3 * i) for i in range(8)]
    params = [greedy() if i % 2 else seeded(100 + i) for i in range(8)]
    alone = [run(qtiny, "off", [p], [sp])[0][0] for p, sp in zip(prompts, params, strict=True)]
    together, stats, engine = run(qtiny, "ngram", prompts, params, stagger=stagger)
    assert together == alone
    assert sum(s.drafted_tokens for s in stats) > 0
    assert sum(s.accepted_tokens for s in stats) > 0
    assert engine.stats().drafted_tokens == sum(s.drafted_tokens for s in stats)


def test_with_the_prefix_cache_and_small_chunks(qtiny) -> None:
    """A next turn from the prefix cache and prompts prefilled in small chunks beside
    drafting rows: still the same tokens."""
    first = copy_prompt(40)
    prompts = [first, first + [5, 6, 7], copy_prompt(41)]
    params = [greedy(), seeded(9), greedy()]
    alone = [run(qtiny, "off", [p], [sp])[0][0] for p, sp in zip(prompts, params, strict=True)]
    together, stats, _ = run(qtiny, "ngram", prompts, params, stagger=True, prefill_burst=8,
                             whole_prompt_tokens=0)
    assert together == alone
    assert sum(s.drafted_tokens for s in stats) > 0


def test_rows_with_log_probabilities_do_not_draft_and_keep_theirs(qtiny) -> None:
    prompts = [copy_prompt(50), copy_prompt(51)]
    params = [SamplingParams(max_tokens=N, logprobs=2), greedy()]
    off, _, _ = run(qtiny, "off", prompts, params)
    on, stats, _ = run(qtiny, "ngram", prompts, params)
    assert on == off
    assert stats[0].drafted_tokens == 0 and stats[1].drafted_tokens > 0


def test_eos_and_max_tokens_inside_accepted_drafts(qtiny) -> None:
    """A row that ends inside a run of accepted drafts stops exactly where it would without
    speculation (max_tokens here; an end-of-sequence token takes the same cut)."""
    for n in (5, 9, 13):
        prompt = [copy_prompt(60)]
        off, _, _ = run(qtiny, "off", prompt, [greedy(n)])
        on, _, _ = run(qtiny, "ngram", prompt, [greedy(n)])
        assert on == off and len(on[0]) == n


def test_config_rejects_an_unknown_mode() -> None:
    from engine import EngineConfig

    with pytest.raises(ValueError, match="speculative"):
        EngineConfig(speculative="draft")


def test_a_lone_row_drafts_beside_a_prompt_prefilled_in_chunks(qtiny) -> None:
    """The lone row's input and drafts are one segment of the pass that also runs the other
    prompt's chunks (engine/ragged_pass.py): both answers as without speculation."""
    long_prompt = [random.Random(2).randrange(256) for _ in range(120)]

    def answers(speculative: str):
        engine = drafting_pays(engine_on(qtiny, speculative=speculative, prefill_burst=8,
                                         whole_prompt_tokens=0))
        a = engine.submit(prompt_tokens=copy_prompt(3), params=greedy(60))
        for _ in range(6):
            engine.step()
        b = engine.submit(prompt_tokens=long_prompt, params=seeded(4, 5))
        run_to_end(engine)
        return [list(a.tokens), list(b.tokens)], a.stats

    off, _ = answers("off")
    on, stats = answers("ngram")
    assert on == off
    assert stats.accepted_tokens > 0


def test_sampled_replies_have_the_same_distribution(qtiny) -> None:
    """Unseeded sampled requests (each draws its own seed): at every position the token's
    distribution with speculation matches the one without (chi-square tests of
    homogeneity, 0.1 % in all), while drafts were both accepted and refused. A check that
    took drafts without drawing (or drew wrongly) moves mass onto the drafted tokens."""
    from collections import Counter

    prompt = copy_prompt(70, length=6, repeats=4)
    n, length = 600, 12
    params = SamplingParams(max_tokens=length, temperature=1.0, top_k=2)
    samples, stats = {}, {}
    for mode in ("off", "ngram"):
        engine = drafting_pays(engine_on(qtiny, speculative=mode, max_concurrent=64,
                                         max_queue=n))
        streams = [engine.submit(prompt_tokens=prompt, params=params) for _ in range(n)]
        run_to_end(engine)
        samples[mode] = [list(s.tokens) for s in streams]
        stats[mode] = engine.stats()
    assert stats["ngram"].drafted_tokens > 500
    assert 0 < stats["ngram"].accepted_tokens < stats["ngram"].drafted_tokens
    tested = 0
    for position in range(1, length):
        counts = {mode: Counter(t[position] for t in samples[mode]) for mode in samples}
        cells = [c for c in set(counts["off"]) | set(counts["ngram"])
                 if counts["off"][c] + counts["ngram"][c] >= 10]
        if len(cells) < 2:
            continue
        chi2 = sum((counts[mode][c] - (counts["off"][c] + counts["ngram"][c]) / 2) ** 2
                   / ((counts["off"][c] + counts["ngram"][c]) / 2)
                   for c in cells for mode in ("off", "ngram"))  # equal sample sizes
        df = len(cells) - 1
        # the 99.99th percentile of chi-square(df) (Wilson-Hilferty): 0.1 % over 11 tests
        critical = df * (1 - 2 / (9 * df) + 3.72 * (2 / (9 * df)) ** 0.5) ** 3
        assert chi2 < critical, (position, chi2, critical, counts)
        tested += 1
    assert tested >= 8


def test_only_a_copying_row_gives_up_running_ahead() -> None:
    """A lone row runs ahead (its next step starts before its token is read) unless it is
    copying: its text ends in an n-gram seen before. With nothing to draft, speculation
    costs a row nothing."""
    spec = Speculation("ngram")
    copying, fresh = RowLike(copy_prompt(80), 10), RowLike(list(range(1, 60)), 10)
    assert spec.wants_to_draft(copying)
    assert not spec.wants_to_draft(fresh)
    fresh.output_tokens += [1, 2]  # its output now repeats its start
    assert spec.wants_to_draft(fresh)
    copying.spec.rest = 3
    assert not spec.wants_to_draft(copying)  # resting


def test_without_speculation_a_step_gives_one_token(qtiny) -> None:
    _, stats, engine = run(qtiny, "off", [copy_prompt(90)], [greedy(20)])
    assert stats[0].decode_steps == 19 and stats[0].tokens_per_step == 1.0
    assert engine.stats().tokens_per_step == 1.0 and engine.stats().acceptance_rate is None


def test_a_check_pays_its_fixed_cost_only_with_enough_likely_tokens() -> None:
    """Checking drafts costs a tick a fixed part (on this CPU a batch's check is a ragged
    pass, not the compiled step) and a part per position, both fitted from the checked
    ticks; the tick checks its rows' drafts only if what they are likely to gain pays for
    both. Chats' rows (acceptance ~0.7) at 8 rows do not; rows copying code (0.95) do."""
    spec = Speculation("ngram", max_drafts=8)
    costs = spec.costs
    costs.observe_plain(8, 0.024)  # a row's token is worth 3 ms
    for positions in (2, 8, 16, 32):
        costs.observe_checked(8, positions, 0.024 + 0.011 + 0.0012 * positions)
    costs.observe_checked(8, 4, 0.024 + 0.200)  # one slow tick (a first-use compile): not taken
    fit = costs.check(8)
    assert fit.fixed_s == pytest.approx(0.011) and fit.position_s == pytest.approx(0.0012)

    def rows_at(p: float, n: int = 8) -> list[RowLike]:
        rows = [RowLike(list(range(10, 30)) * 2) for _ in range(n)]
        for row in rows:
            spec.row(row).hits, row.spec.trials, row.spec.k = p, 1.0, 8
        return rows

    chats = rows_at(0.69)  # 2 drafts each: 8 x 1.17 tokens x 3 ms = 28 < 11 + 16 x 1.2 ms
    assert spec.plan(chats, 1000) == {}
    assert all(r.spec.rest == spec.retry_after for r in chats)  # they try again soon
    code = rows_at(0.95)  # 8 drafts each: 8 x 6.3 tokens x 3 ms = 151 > 11 + 64 x 1.2 ms
    assert spec.plan(code, 1000) == {i: list(range(10, 18)) for i in range(8)}
    one = rows_at(0.95)[:1] + rows_at(0.0)[1:]  # one such row: 19 ms < 11 + 8 x 1.2 ms
    assert spec.plan(one, 1000) == {}


def test_one_slow_check_does_not_turn_drafting_off_for_good() -> None:
    """Costs that say not even a draft that always holds pays for its position stop
    drafting at that row count (its steps run ahead again); after some plain ticks one
    checks a draft or two anyway, so the position's cost is measured again: a slow check
    is outvoted by the next (medians of the last few), and while the costs keep saying no
    the checks come half as often each time."""
    spec = Speculation("ngram")
    costs = spec.costs
    costs.observe_plain(1, 0.010)
    costs.set_check(0.050)  # one hiccup: a position "cost" 5 steps
    row = RowLike([7, 8, 9, 7, 8])
    assert spec.plan([row], 1000, can_measure=True) == {} and not spec.will_draft([row])
    for _ in range(costs.first_wait):
        assert spec.plan([row], 1000, can_measure=True) == {}
        costs.observe_plain(1, 0.010)
    assert spec.will_draft([row])  # a check is due: the row reads its token first
    assert spec.plan([row], 1000) == {}  # not in a tick with prefill (it is not measured)
    assert spec.plan([row], 1000, can_measure=True) == {0: [9, 7]}  # the check
    costs.observe_checked(1, 2, 0.010 + 2 * 0.0015)  # a position costs 1.5 ms after all
    assert costs.pays(1, spec.max_drafts)
    assert spec.plan([row], 1000, can_measure=True) == {0: [9, 7, 8]}

    again = Speculation("ngram")  # four rows: a row's share of a step is 10 ms
    again.costs.observe_plain(4, 0.040)
    again.costs.set_check(0.015, rows=4)
    rows = [RowLike([7, 8, 9, 7, 8]) for _ in range(4)]
    waits = []
    for _ in range(3):
        n = 0
        while again.plan(rows, 1000, can_measure=True) == {}:
            again.costs.observe_plain(4, 0.040)
            n += 1
        again.costs.observe_checked(4, 8, 0.040 + 8 * 0.015)  # still 15 ms a position
        waits.append(n)
    assert waits == [16, 32, 64]


# -- a batch without the ragged pass (a GPU's): rows checked in a pass of their own --------


def test_a_uniform_pass_drafts_only_the_columns_its_rows_pay_for() -> None:
    """Without the ragged pass every row gets as many positions as the row with most
    drafts: a column is used while the drafting rows' likely tokens from it pay for a
    position in every row."""
    spec = Speculation("ngram", max_drafts=8)
    spec.costs.observe_plain(4, 0.040)  # a row's share: 10 ms
    spec.costs.set_check(0.003, rows=4)  # a column of 4 rows: 12 ms
    copying = [RowLike([7, 8, 9, 7, 8]) for _ in range(4)]
    plan = spec.plan(copying, 1000, uniform=True)
    # 4 rows at acceptance 2/3: column j gains 4 x (2/3)^j x 10 ms; pays for j <= 2
    # (17.8 ms, then 11.9)
    assert plan == {i: [9, 7] for i in range(4)}
    lone_copier = [RowLike([7, 8, 9, 7, 8])] + [RowLike(list(range(1, 9))) for _ in range(3)]
    # one drafting row: (2/3) x 10 ms < 12 ms, so no column pays; the row rests
    assert spec.plan(lone_copier, 1000, uniform=True) == {}
    assert lone_copier[0].spec.rest > 0
    # the same row in the ragged pass pays only for its own positions (3 ms each)
    fresh = [RowLike([7, 8, 9, 7, 8])] + [RowLike(list(range(1, 9))) for _ in range(3)]
    assert spec.plan(fresh, 1000) == {0: [9, 7]}


@pytest.fixture
def without_ragged_pass(monkeypatch):
    """The engine as on a GPU, on this CPU: no ragged pass, so a batch's step is its own
    pass and a drafting batch checks its drafts in `DecodeBatch.verify_rows` (counted)."""
    from engine import testing
    from engine.decode_batch import DecodeBatch

    testing.without_ragged_passes(monkeypatch)
    calls = []
    verify = DecodeBatch.verify_rows

    def counted(self, drafts):
        calls.append([len(d) for d in drafts])
        return verify(self, drafts)

    monkeypatch.setattr(DecodeBatch, "verify_rows", counted)
    return calls


@pytest.mark.parametrize("run_ahead", [False, True])
def test_a_batch_without_the_ragged_pass_checks_its_drafts_in_one_pass(
        qtiny, without_ragged_pass, run_ahead) -> None:
    """Six rows (greedy, seeded, a repetition penalty), joining while others decode, with
    and without the batch's step started ahead (a GPU's): every row's tokens equal its run
    alone without speculation, and the batch's drafts were checked together, rows of
    different draft lengths padded in one pass."""
    prompts = [copy_prompt(20 + i, length=8 + 3 * i) for i in range(6)]
    params = [greedy(), seeded(200), SamplingParams(max_tokens=N, temperature=0.7, seed=5,
                                                    repetition_penalty=1.1),
              greedy(), seeded(201), greedy()]
    alone = [run(qtiny, "off", [p], [sp])[0][0] for p, sp in zip(prompts, params, strict=True)]
    together, stats, engine = run(qtiny, "ngram", prompts, params, stagger=True,
                                  batch_run_ahead=run_ahead)
    assert together == alone
    assert sum(s.accepted_tokens for s in stats) > 0
    batched = [c for c in without_ragged_pass if len(c) > 1]
    assert batched, "no batch checked drafts in its own pass"
    assert any(len(set(c)) > 1 for c in batched)  # rows with different draft counts
    assert engine.stats().drafted_tokens == sum(s.drafted_tokens for s in stats)
