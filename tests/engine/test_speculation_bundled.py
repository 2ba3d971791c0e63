"""Issue #31 on the bundled model (SmolLM2-135M, the default int8 CPU path): asked to
repeat a piece of code with an edit, replies drafted from their own prompt and checked in
the batch are token for token the replies without speculation, greedy and seeded, alone
and four at once, and most drafts are accepted. Whether drafting pays is measured from
the machine's own tick times (engine/speculation.py), which another process's load moves
(a run beside the rest of the suite once stopped drafting at 1.07 tokens a step); so the
rows draft here whatever their costs (`drafting_pays`), and what is asserted is the
answers and the drafts' acceptance, not the machine's timing."""

import pytest

from bench.speculative import CODE as CODE_SNIPPETS
from engine import Engine, EngineConfig, SamplingParams
from tests.engine.conftest import drafting_pays, run_to_end

pytestmark = pytest.mark.bundled

CODE = CODE_SNIPPETS[0]  # the benchmark's first piece of code (merge_sorted)
ASKS = ["Repeat this code exactly, in a code block:\n\n",
        "Add type hints to this function and show the whole function:\n\n",
        "Rename the variable out to merged and show the code:\n\n",
        "Copy this Python code:\n\n"]
N = 96


@pytest.fixture(scope="module")
def loaded():
    from engine.loader import bundled_model_path, load_model

    return load_model(str(bundled_model_path()))


def answers(loaded, speculative: str, params: list[SamplingParams], together: bool):
    engine = drafting_pays(
        Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
               context_length=loaded.context_length,
               config=EngineConfig(max_concurrent=8, speculative=speculative)))
    out = []
    streams = []
    for ask, sp in zip(ASKS, params, strict=True):
        streams.append(engine.submit(messages=[{"role": "user", "content": ask + CODE}],
                                     params=sp))
        if not together:
            run_to_end(engine)
    run_to_end(engine)
    for s in streams:
        assert s.error is None
        out.append(list(s.tokens))
    return out, [s.stats for s in streams]


@pytest.mark.parametrize("kind", ["greedy", "seeded"])
def test_code_replies_are_the_same_with_speculation(loaded, kind) -> None:
    params = [SamplingParams(max_tokens=N) if kind == "greedy" else
              SamplingParams(max_tokens=N, temperature=0.7, top_p=0.9, seed=20 + i)
              for i in range(len(ASKS))]
    off, _ = answers(loaded, "off", params, together=False)
    alone, stats_alone = answers(loaded, "ngram", params, together=False)
    batched, stats_batched = answers(loaded, "ngram", params, together=True)
    assert alone == off
    assert batched == off
    for stats in (stats_alone, stats_batched):
        drafted = sum(s.drafted_tokens for s in stats)
        accepted = sum(s.accepted_tokens for s in stats)
        assert drafted > 0 and accepted / drafted > 0.3, (accepted, drafted)
        assert max(s.tokens_per_step for s in stats) > 1.1
