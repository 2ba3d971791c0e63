"""Issue #50 (4): a draft model that an engine of this process serves is that engine's model,
not a second copy. The bundled model serves; its Q8_0 copy (the same tokenizer) is loaded
with "draft:<the bundled file>" and drafts with the serving engine's runner: the same
modules and arrays. Its answers are its own without speculation (greedy and seeded), also
while the serving engine answers on its own thread at the same time, and that one's answer
is its own alone. Once the serving engine shut down, a draft of that file is loaded again
(its own copy)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mlx.utils import tree_flatten

from engine import Engine, EngineConfig, SamplingParams, testing
from engine.draft_model import DraftModel
from tests.engine.conftest import drafting_pays
from tests.fleet_models import bundled_path, requantize

KV = 32 << 20
PROMPT = [{"role": "user", "content": "Count from one to twenty in words, one per line."}]
PARAMS = [SamplingParams(max_tokens=40),
          SamplingParams(max_tokens=40, temperature=0.8, top_p=0.9, seed=5)]


@pytest.fixture(scope="module")
def q8(tmp_path_factory) -> Path:
    return requantize(bundled_path(), tmp_path_factory.mktemp("draft-share") / "smol-q8.gguf")


def load(source: str | Path, speculative: str = "off") -> Engine:
    return Engine.load(str(source), EngineConfig(kv_budget_bytes=KV, speculative=speculative))


async def answers(engine: Engine, params: list[SamplingParams]) -> list[list[int]]:
    streams = [engine.submit(PROMPT, params=p) for p in params]
    for stream in streams:
        async for _ in stream:
            pass
        assert stream.finish_reason in ("length", "stop"), stream.error
    return [list(s.tokens) for s in streams]


async def alone(engine: Engine, params: list[SamplingParams]) -> list[list[int]]:
    await engine.start()
    try:
        return await answers(engine, params)
    finally:
        await engine.shutdown()


def draft_of(engine: Engine) -> DraftModel:
    source = testing.facts(engine).draft_source
    assert isinstance(source, DraftModel)
    return source


async def test_a_serving_model_drafts_for_another_without_a_second_copy(q8):
    draft = str(bundled_path())
    own = await alone(load(q8), PARAMS)  # the target without speculation
    donor_alone = await alone(load(draft), PARAMS[:1])

    donor = load("bundled")  # named as the app names it; the draft names its file
    target = drafting_pays(load(q8, f"draft:{draft}"))
    source = draft_of(target)
    assert source.shared
    served = testing.facts(donor).module_tree
    assert source.runner.model is served  # the serving engine's modules, kernels in them
    ids = {id(a) for _, a in tree_flatten(served.parameters())}
    assert ids and ids == {id(a) for _, a in tree_flatten(source.runner.model.parameters())}

    await donor.start()
    await target.start()
    try:
        # both engines' threads run the shared modules at once
        both = await asyncio.gather(answers(target, PARAMS), answers(donor, PARAMS[:1]))
        assert both == [own, donor_alone]
        assert target.stats().drafted_tokens > 0 and target.stats().accepted_tokens > 0
        assert source.passes > 0
    finally:
        await target.shutdown()
        await donor.shutdown()

    # the serving engine gone, the file is loaded again as a draft of its own
    again = load(q8, f"draft:{draft}")
    assert not draft_of(again).shared
    assert draft_of(again).runner.model is not served
    assert await alone(drafting_pays(again), PARAMS) == own
