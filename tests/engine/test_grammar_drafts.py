"""A grammar's forced tokens as its row's drafts (engine/grammar_planner.py), and the
scheduler's planners (engine/planners.py).

Where a grammar forces what comes next (a JSON schema's keys and punctuation, a regex's
fixed text), the row checks llguidance's fast-forward tokens as drafts and takes several in
one pass. The tokens must be exactly those of the same row without grammar drafts, one a
tick: greedy, seeded, with a repetition penalty, alone, in a batch beside free rows and
n-gram drafting rows, and without the ragged pass (as on a GPU). On a tiny random-weight
model quantized as the bundled model is (the native kernels: answers that do not depend
on the batch, docs/determinism.md).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from engine import SamplingParams, testing
from engine.grammars import json_schema_grammar, regex_grammar
from engine.scheduler import Scheduler
from tests.engine.conftest import engine_on, native_quantized_tiny, prompts, run_to_end
from tests.engine.test_constrained import PERSON, Reply

SAMPLINGS = {"greedy": {}, "seeded": {"temperature": 0.9, "top_p": 0.95, "seed": 3},
             "penalty": {"temperature": 0.7, "seed": 4, "repetition_penalty": 1.3}}


@pytest.fixture(scope="module")
def qtiny():
    return native_quantized_tiny(seed=7)


def person(sampling: dict[str, Any], **kw: Any) -> SamplingParams:
    return SamplingParams(max_tokens=kw.pop("max_tokens", 200),
                          grammar=json_schema_grammar(PERSON), **sampling, **kw)


def run(qtiny, requests: list[tuple[list[int], SamplingParams]], grammar_drafts: bool,
        **config: Any) -> tuple[list[Reply], int]:
    """Every request submitted at once, stepped to the end; the replies and the ticks."""
    engine = engine_on(qtiny, max_concurrent=16, grammar_drafts=grammar_drafts, **config)
    replies = [Reply(engine, p, params) for p, params in requests]
    return replies, run_to_end(engine)


def drafted(replies: list[Reply]) -> int:
    return sum(r.events[-1].stats.drafted_tokens for r in replies)


@pytest.mark.parametrize("sampling", SAMPLINGS.values(), ids=SAMPLINGS.keys())
@pytest.mark.parametrize("ragged", [True, False], ids=["ragged", "apart"])
def test_a_lone_json_row_takes_its_forced_tokens_in_fewer_ticks(qtiny, monkeypatch,
                                                                  sampling, ragged) -> None:
    if not ragged:  # as on a GPU: the lone row checks its drafts in a pass of its own
        testing.without_ragged_passes(monkeypatch)
    request = [(prompts(1, seed=21)[0], person(sampling))]
    with_drafts, ticks = run(qtiny, request, True)
    without, plain_ticks = run(qtiny, request, False)
    assert with_drafts[0].tokens == without[0].tokens
    assert with_drafts[0].finish == "stop"
    jsonschema.validate(json.loads(with_drafts[0].text), PERSON)
    stats = with_drafts[0].events[-1].stats
    assert stats.drafted_tokens > 0 and stats.accepted_tokens > 0
    assert drafted(without) == 0
    assert ticks < plain_ticks
    assert stats.decode_steps < without[0].events[-1].stats.decode_steps


@pytest.mark.parametrize("sampling", SAMPLINGS.values(), ids=SAMPLINGS.keys())
@pytest.mark.parametrize("speculative", ["off", "ngram"])
def test_a_batch_s_grammar_rows_draft_and_every_row_keeps_its_tokens(qtiny, sampling,
                                                                      speculative) -> None:
    """8 rows with a schema or a regex among 8 free rows (n-gram drafting ones with
    "ngram"): every row's tokens are those of the run without grammar drafts."""
    ps = prompts(16, seed=23)
    ps = [p * 3 for p in ps]  # (a repeated prompt: the free rows' n-grams recur)
    requests = []
    for i, p in enumerate(ps):
        if i % 4 == 0:
            params = person(sampling)
        elif i % 4 == 2:
            params = SamplingParams(max_tokens=40, grammar=regex_grammar(r"id-[0-9]{3}-done"),
                                    **sampling)
        else:
            params = SamplingParams(max_tokens=24, **sampling)
        requests.append((p, params))
    config = {"speculative": speculative}
    with_drafts, _ = run(qtiny, requests, True, **config)
    without, _ = run(qtiny, requests, False, **config)
    assert [r.tokens for r in with_drafts] == [r.tokens for r in without]
    held = [r for (_, params), r in zip(requests, with_drafts, strict=True) if params.grammar]
    assert drafted(held) > 0
    assert all(r.finish == "stop" for r in held)
    if speculative == "off":
        assert drafted(with_drafts) == drafted(held)  # only the grammar rows drafted


def test_a_row_that_asks_for_log_probabilities_never_drafts(qtiny) -> None:
    request = [(prompts(1, seed=25)[0], person({}, logprobs=2))]
    replies, _ = run(qtiny, request, True)
    without, _ = run(qtiny, request, False)
    assert drafted(replies) == 0
    assert [e.logprob for e in replies[0].events] == [e.logprob for e in without[0].events]


def test_a_grammar_that_cannot_take_drafts_back_is_given_none(qtiny) -> None:
    """llguidance rolls back no max_tokens= lexeme (a thinking budget's grammar): such a
    row's forced tokens are not checked as drafts, and asking leaves its matcher as it was
    (tests/engine/test_reasoning_budget.py runs budgeted rows in a batch)."""
    from engine.constraint import GrammarTokenizer
    from engine.grammars import lark_grammar

    grammars = GrammarTokenizer(qtiny.tokenizer, [])
    limited = grammars.matcher(lark_grammar('start: "ab" think "cd" rest\n'
                                            "think[max_tokens=3]: /(?s:.*?)/\n"
                                            "rest: /(?s:.*)/\n"))
    forced = limited.forced()
    assert forced and not limited.can_check(forced)
    assert not limited.matcher.is_error() and limited.forced() == forced
    plain = grammars.matcher(regex_grammar("abcd[0-9]+"))
    assert plain.forced() and plain.can_check(plain.forced())


def test_a_sliding_window_model_gets_no_grammar_drafts(monkeypatch) -> None:
    """A sliding window's cache cannot always take refused drafts back (once it wraps):
    such a model's grammar rows run 1 position a tick, and answer as before."""
    from mlx_lm.models.cache import RotatingKVCache

    tiny = native_quantized_tiny(seed=8)
    layers = len(tiny.model.layers)
    monkeypatch.setattr(tiny.model, "make_cache",
                        lambda: [RotatingKVCache(max_size=64) for _ in range(layers)],
                        raising=False)
    engine = engine_on(tiny, grammar_drafts=True)
    assert testing.facts(engine).grammar_drafts == 0
    reply = Reply(engine, prompts(1, seed=27)[0], person({}, max_tokens=40))
    run_to_end(engine)
    assert drafted([reply]) == 0 and reply.tokens


def test_grammar_drafts_off_checks_no_forced_tokens(qtiny) -> None:
    replies, _ = run(qtiny, [(prompts(1, seed=26)[0], person({}))], False)
    assert drafted(replies) == 0
    assert testing.facts(engine_on(qtiny)).draft_source is None  # speculation is off


# -- the scheduler's planners (engine/planners.py) ----------------------------------------


class Row:
    def __init__(self, kind: str) -> None:
        self.kind = kind


class Planner:
    """A planner that owns rows of one kind and drafts [index] for each."""

    def __init__(self, kind: str, log: list[tuple]) -> None:
        self.kind, self.log = kind, log

    def owns(self, seq: Row) -> bool:
        return seq.kind in (self.kind, "both")

    def drafts(self, tick, mine):
        self.log.append((self.kind, "drafts", tick.check, tick.can_measure, list(mine)))
        return {i: [i] for i in mine}

    def skip(self, rows, mine):
        self.log.append((self.kind, "skip", list(mine)))

    def will_draft(self, rows, mine):
        return self.kind == "b" and bool(mine)

    def checked(self, seq, drafts, taken):
        self.log.append((self.kind, "checked", seq.kind, taken))

    def measured(self, rows, drafted, seconds):
        self.log.append((self.kind, "measured", rows, drafted))

    def forget(self, seq):
        self.log.append((self.kind, "forget", seq.kind))


def test_each_row_is_its_first_owner_s_and_every_planner_is_asked() -> None:
    from engine import EngineConfig
    from engine.planners import DecodeRows

    log: list[tuple] = []
    sched = Scheduler(EngineConfig(), planners=[Planner("a", log), Planner("b", log)])
    rows = [Row("a"), Row("b"), Row("both"), Row("none")]
    checks: list[Any] = []

    def decode_rows(started_ahead: bool = False, check: Any = "ragged") -> DecodeRows:
        return DecodeRows(rows, True, None, started_ahead, 1000,  # type: ignore[arg-type]
                          lambda plan: checks.append(plan) or check)

    plan = sched.schedule(decode_rows())
    assert plan.rows == rows and [n for _, n in plan.positions()] == [2, 2, 2, 1]
    assert plan.drafts == {0: [0], 2: [2], 1: [1]}
    assert log == [("a", "drafts", "ragged", True, [0, 2]), ("b", "drafts", "ragged", True, [1])]
    assert checks == [plan]  # the runner was asked how this plan's rows would check

    log.clear()
    assert sched.schedule(decode_rows(started_ahead=True)).drafts == {}
    assert log == [("a", "skip", [0, 2]), ("b", "skip", [1])]
    log.clear()
    assert sched.schedule(decode_rows(check=None)).drafts == {}
    assert log == []
    assert sched.will_draft(rows) and not sched.will_draft([rows[0]])

    log.clear()
    sched.checked(rows[2], [2], 1)
    sched.measured(4, 3, 0.1)
    sched.forget(rows[1])
    assert log == [("a", "checked", "both", 1), ("a", "measured", 4, 3),
                   ("b", "measured", 4, 3), ("a", "forget", "b"), ("b", "forget", "b")]
    assert Scheduler(EngineConfig()).schedule(decode_rows()).drafts == {}  # no planners
