"""EngineBridge.submit(share_prompt_with=...): N local answers to one message prefill its
prompt once, each the answer it gives alone; a remote reply is never a leader."""

from __future__ import annotations

from app.bridge import EngineBridge
from app.request.tab import tab_request
from engine import Engine, EngineConfig

from .history_sync_helpers import tiny, wait_until

MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Name three rivers and say where they flow."}]


def params(seed: int) -> dict:
    return {"max_tokens": 8, "temperature": 0.9, "seed": seed}


async def answers(share: bool, n: int = 3) -> tuple[list[list[int]], int, int]:
    """n answers (seeds 7 + i) on a fresh engine: their tokens, the prompt length and the
    prompt tokens the engine computed."""
    t = tiny()
    bridge = EngineBridge()
    await bridge.use_engine(Engine(t.model, t.tokenizer, eos_token_ids=[],
                                   context_length=t.context_length,
                                   config=EngineConfig(prefill_burst=16)), "tiny")
    try:
        first = bridge.submit(tab_request(MESSAGES, params(7)), tag="a")
        gens = [first] + [bridge.submit(tab_request(MESSAGES, params(7 + i)), tag="a",
                                        share_prompt_with=first if share else None)
                          for i in range(1, n)]
        await wait_until(lambda: all(g.is_finished for g in gens), timeout=30)
        stats = bridge.stats()
        assert stats is not None
        return [g.tokens for g in gens], len(first.stream.prompt_tokens), \
            stats.total_prompt_tokens
    finally:
        await bridge.shutdown(timeout=2.0)


async def test_n_local_answers_prefill_the_prompt_once():
    shared, p, computed = await answers(share=True)
    alone, _, computed_alone = await answers(share=False)
    assert shared == alone and len({tuple(a) for a in shared}) == 3
    assert computed == p + 2
    assert computed_alone == 3 * p
