"""A tick's plan says how many positions each sequence runs (a prompt chunk, 1 for a decode
row, 1 + k for a row checking k drafts), and the runner's passes run exactly those
(`TickPlan.positions`, `ModelRunner.execute`)."""

from __future__ import annotations

import random

import pytest

from engine import SamplingParams, testing
from engine.decode_batch import DecodeBatch
from tests.engine.conftest import drafting_pays, engine_on, native_quantized_tiny, run_to_end


@pytest.fixture(scope="module")
def qtiny():
    return native_quantized_tiny(seed=11)


def copy_prompt(seed: int, length: int = 12, repeats: int = 3) -> list[int]:
    """A prompt that repeats a random phrase: its continuation is easy to draft."""
    rng = random.Random(seed)
    phrase = [rng.randrange(0, 256) for _ in range(length)]
    return phrase * repeats + phrase[: length // 2]


def traced(engine, monkeypatch) -> list[dict]:
    """Each tick's planned positions, and the positions its passes fed the model."""
    runner = testing.internals(engine).runner
    ticks: list[dict] = []
    execute, ragged = runner.execute, runner.ragged

    def planned(plan, batch, tokens):
        ticks.append({"positions": [n for _, n in plan.positions()],
                      "rows": len(plan.rows), "drafts": dict(plan.drafts), "fed": []})
        return execute(plan, batch, tokens)

    def fed_ragged(decode, tokens, chunks, logits, drafts=None):
        ticks[-1]["fed"].append(len(tokens) + sum(map(len, drafts or []))
                                + sum(len(piece) for _, piece in chunks))
        return ragged(decode, tokens, chunks, logits, drafts)

    monkeypatch.setattr(runner, "execute", planned)
    monkeypatch.setattr(runner, "ragged", fed_ragged)
    return ticks


def submit_staggered(engine, n: int, tokens: int) -> list:
    streams = []
    for i in range(n):
        streams.append(engine.submit(prompt_tokens=copy_prompt(20 + i, length=8 + 2 * i),
                                     params=SamplingParams(max_tokens=tokens)))
        for _ in range(3):
            engine.step()
    run_to_end(engine)
    return streams


def test_a_ragged_tick_feeds_the_model_exactly_the_planned_positions(qtiny,
                                                                      monkeypatch) -> None:
    engine = drafting_pays(engine_on(qtiny, speculative="ngram", max_concurrent=8,
                                     prefill_burst=16))
    if not testing.facts(engine).ragged:
        pytest.skip("this model's passes are not ragged here")
    ticks = traced(engine, monkeypatch)
    streams = submit_staggered(engine, 5, 24)
    assert all(s.finish_reason == "length" for s in streams)
    one_pass = [t for t in ticks if t["fed"]]
    assert one_pass
    for t in one_pass:
        assert t["fed"] == [sum(t["positions"])]  # one pass, every planned position
    # rows with drafts ran 1 + k positions beside prompt chunks in the same pass
    drafted = [t for t in one_pass if t["drafts"] and len(t["positions"]) > t["rows"]]
    assert drafted
    for t in drafted:
        for row, d in t["drafts"].items():
            assert t["positions"][row] == 1 + len(d)


def test_without_the_ragged_pass_drafting_rows_check_in_a_padded_pass(qtiny,
                                                                     monkeypatch) -> None:
    """As on a GPU: the runner checks a batch's drafts in a pass of its own in a tick
    without prefill, each row padded to the most drafts; the plan's drafts are those it
    checks."""
    testing.without_ragged_passes(monkeypatch)
    engine = drafting_pays(engine_on(qtiny, speculative="ngram", max_concurrent=8))
    ticks = traced(engine, monkeypatch)
    checked: list[list[int]] = []
    verify_rows = DecodeBatch.verify_rows
    monkeypatch.setattr(DecodeBatch, "verify_rows",
                        lambda self, drafts: checked.append([len(d) for d in drafts])
                        or verify_rows(self, drafts))
    streams = submit_staggered(engine, 4, 24)
    assert all(s.finish_reason == "length" for s in streams)
    assert not any(t["fed"] for t in ticks)  # no ragged pass
    padded = [t for t in ticks if t["drafts"] and t["rows"] > 1]
    assert padded and len(checked) == len(padded)
    for t, counts in zip(padded, checked, strict=True):
        assert len(t["positions"]) == t["rows"]  # no prefill beside a padded check
        assert counts == [len(t["drafts"].get(i, [])) for i in range(t["rows"])]
        assert t["positions"] == [1 + c for c in counts]
