"""Prompts prefilled straight into the slot rows they decode in (engine/staged_rows.py,
issue #47): joining copies nothing, a prompt's entry is read from its row while it decodes,
and rows re-placed when others leave meanwhile keep every answer exact."""

from __future__ import annotations

from engine import SamplingParams
from engine.slot_cache import SlotKVCache
from tests.engine.conftest import prompts, reference_tokens, run_to_end


def _count(monkeypatch, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(SlotKVCache, name)

    def spy(self, *args, **kwargs):
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SlotKVCache, name, spy)
    return calls


def test_a_running_rows_prompt_is_restored_from_its_row(tiny, make_engine, monkeypatch):
    """Two prompts admitted together are staged (no SlotKVCache.add: nothing copied in at
    joining); while they decode, a prompt that starts with one of them restores all of it
    from that row (its live entry) and gives mlx-lm's own tokens, and so do they."""
    added = _count(monkeypatch, "add")
    engine = make_engine(max_concurrent=4)
    a, b = prompts(2, seed=61)
    a = a + a  # long enough to be worth restoring
    first = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=30))
             for p in (a, b)]
    while not all(len(s.tokens) >= 2 for s in first):
        engine.step()
    assert added == []
    assert engine.stats().prefix_cached_bytes == 0  # the live entries hold no buffer
    turn = a + [5, 6, 7]
    follower = engine.submit(prompt_tokens=turn, params=SamplingParams(max_tokens=8))
    run_to_end(engine)
    assert follower.stats.cached_tokens == len(a)
    assert follower.tokens == reference_tokens(tiny.model, turn, 8)
    for prompt, stream in zip((a, b), first, strict=True):
        assert stream.tokens == reference_tokens(tiny.model, prompt, 30)


def test_rows_staged_while_others_leave_move_and_stay_exact(tiny, make_engine, monkeypatch):
    """Short replies finish while longer prompts prefill a few tokens a tick in staged
    rows: the staged rows move down next to the rows left (SlotKVCache.move_row), join,
    and every reply is mlx-lm's own; a next turn on each reuses its whole row."""
    moved = _count(monkeypatch, "move_row")
    engine = make_engine(max_concurrent=8, max_token_budget=14, whole_prompt_tokens=0,
                         min_prefill_tokens=4, shared_min_prefill_tokens=4)
    short = prompts(3, seed=62)
    lengths = [2, 3, 4]
    early = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=n))
             for p, n in zip(short, lengths, strict=True)]
    while not all(len(s.tokens) >= 1 for s in early):
        engine.step()
    long = [p + p + p for p in prompts(3, seed=63)]
    late = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=12))
            for p in long]
    run_to_end(engine)
    assert moved  # some staged row was re-placed
    for prompt, stream, n in zip(short + long, early + late, lengths + [12] * 3, strict=True):
        assert stream.tokens == reference_tokens(tiny.model, prompt, n)
    for prompt, stream in zip(long, late, strict=True):
        turn = prompt + stream.tokens + [65]
        again = engine.submit(prompt_tokens=turn, params=SamplingParams(max_tokens=4))
        run_to_end(engine)
        assert again.stats.cached_tokens == len(prompt) + 11
        assert again.tokens == reference_tokens(tiny.model, turn, 4)
