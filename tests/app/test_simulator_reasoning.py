"""Issue #49: the load simulator on a reasoning model reports TTFAT, the time to the first
token of the answer (its thinking done), beside TTFT; a model that does not think has none.
On tests/reasoning_model.py's tiny llama with Qwen3's template, its replies steered into
Qwen3's shape by a thinking grammar put on the engine's submit (the test hook: 12 tokens
of thinking, then the answer)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.backend import LocalBackend, LocalTarget
from app.simulator.__main__ import format_summary
from app.simulator.config import SimConfig
from app.simulator.run import SimulationRun
from app.storage import Store
from engine import Engine, EngineConfig
from engine.grammars import lark_grammar
from engine.reasoning import budget_grammar, style_of
from tests.reasoning_model import QWEN3, thinking_tiny

THINKING = 12


async def test_ttfat_comes_after_ttft_for_each_thinking_reply(tmp_path: Path) -> None:
    tiny = thinking_tiny(seed=7, template=QWEN3, quantized=False)
    eng = Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                 context_length=tiny.context_length, config=EngineConfig(max_concurrent=8))
    grammar = lark_grammar(budget_grammar(style_of(tiny.tokenizer._tokenizer.chat_template),
                                          THINKING, tag_tokens=True))
    submit = eng.submit
    eng.submit = lambda *a, params=None, **kw: submit(  # type: ignore[method-assign]
        *a, params=replace(params, grammar=grammar), **kw)
    await eng.start()
    store = Store.open(tmp_path / "h.db")
    try:
        config = SimConfig(arrival="burst", burst_size=6, burst_every_s=0.0, num_requests=6,
                           max_tokens_min=THINKING + 8, max_tokens_max=THINKING + 12, seed=3)
        run = SimulationRun(LocalBackend(LocalTarget(eng)), config, store)
        summary = await run.start()
    finally:
        store.close()
        await eng.shutdown()
    assert summary["completed"] == 6
    for r in run.results:
        assert r.ttft_s is not None and r.ttfat_s is not None and r.ttfat_s > r.ttft_s
    assert summary["ttfat_s"]["n"] == 6
    assert summary["ttfat_s"]["median"] > summary["ttft_s"]["median"]
    assert "TTFAT" in format_summary(summary)
