"""Issue #49: the load simulator reports TTFAT (time to the first answer token) for a
remote target too, from the thinking its server sends apart (`reasoning_content` deltas;
app/simulator/run.py's ServerSplit). The server is this project's API server on loopback
over the tiny thinking model (tests/reasoning_model.py, Qwen3's template), its replies
steered into Qwen3's shape by a thinking grammar put on the engine's submit (the test
hook: 12 tokens of thinking, then the answer); a model that does not think has none."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.backend import RemoteBackend
from app.remote import Connection, RemoteClient
from app.simulator.__main__ import format_summary
from app.simulator.config import SimConfig
from app.simulator.run import SimulationRun
from app.storage import Store
from engine import Engine, EngineConfig
from engine.grammars import lark_grammar
from engine.reasoning import budget_grammar, style_of
from tests.engine.conftest import skip_without_native
from tests.reasoning_model import QWEN3, thinking_tiny
from tests.server.conftest import serving
from tests.tiny_model import make_tiny_model

THINKING = 12


async def simulate(eng: Engine, tmp_path: Path) -> tuple[SimulationRun, dict]:
    config = SimConfig(arrival="burst", burst_size=4, burst_every_s=0.0, num_requests=4,
                       max_tokens_min=THINKING + 8, max_tokens_max=THINKING + 12, seed=3)
    store = Store.open(tmp_path / "h.db")
    async with serving(eng) as s:
        client = RemoteClient(Connection(s.url, model="tiny"))
        try:
            run = SimulationRun(RemoteBackend(client, max_concurrent=8), config, store)
            summary = await run.start()
        finally:
            await client.close()
            store.close()
    return run, summary


async def test_a_remote_thinking_reply_has_its_ttfat(tmp_path: Path) -> None:
    skip_without_native()
    tiny = thinking_tiny(seed=7, template=QWEN3)
    eng = Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                 context_length=tiny.context_length, config=EngineConfig(max_concurrent=8))
    grammar = lark_grammar(budget_grammar(style_of(tiny.tokenizer._tokenizer.chat_template),
                                          THINKING, tag_tokens=True))
    submit = eng.submit
    eng.submit = lambda *a, params=None, **kw: submit(  # type: ignore[method-assign]
        *a, params=replace(params, grammar=grammar), **kw)
    run, summary = await simulate(eng, tmp_path)
    assert summary["completed"] == 4
    for r in run.results:
        assert r.ttft_s is not None and r.ttfat_s is not None and r.ttfat_s > r.ttft_s
    assert summary["ttfat_s"]["n"] == 4
    assert "TTFAT" in format_summary(summary)


async def test_a_remote_model_that_does_not_think_has_no_ttfat(tmp_path: Path) -> None:
    tiny = make_tiny_model()
    eng = Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                 context_length=tiny.context_length, config=EngineConfig(max_concurrent=8))
    run, summary = await simulate(eng, tmp_path)
    assert summary["completed"] == 4
    assert all(r.ttft_s is not None and r.ttfat_s is None for r in run.results)
    assert summary["ttfat_s"]["n"] == 0
    assert "TTFAT" not in format_summary(summary)
