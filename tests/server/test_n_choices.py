"""`n > 1` through the official openai client: n choices with their indices, streamed and
not; choice i is the n = 1 answer with seed s + i; usage counts the prompt once; the prompt
is prefilled once (the engine's own prompt-token counter); refusals and disconnects take
all n."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace

import openai
import pytest

from tests.engine.conftest import engine_on, native_quantized_tiny
from tests.server.conftest import MODEL, serving, wait_for

N = 10
SEED = 1234
MESSAGES = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Give me a name for a grey cat, and say why."}]
SAMPLED = {"temperature": 0.9, "top_p": 0.95, "max_tokens": N}


@pytest.fixture(scope="module")
def qtiny():
    """A tiny llama quantized as the bundled model is: the engine's native kernels run, whose
    answers (log-probabilities included) do not depend on the batch (docs/determinism.md)."""
    return native_quantized_tiny(seed=29)


@pytest.fixture
async def qs(qtiny) -> AsyncIterator[SimpleNamespace]:
    """A real server on loopback over the quantized tiny model, and an openai client."""
    async with serving(engine_on(qtiny, max_concurrent=16)) as s:
        yield SimpleNamespace(engine=s.engine, server=s.server, client=s.client)


async def chat(s, **kw):
    return await s.client.chat.completions.create(model=MODEL, messages=MESSAGES,
                                                  **(SAMPLED | kw))


async def test_n3_chat_choices_are_the_n1_answers_with_seeds_s_plus_i(qs):
    s = qs
    r = await chat(s, n=3, seed=SEED, logprobs=True, top_logprobs=2)
    assert [c.index for c in r.choices] == [0, 1, 2]
    texts = [c.message.content for c in r.choices]
    assert len(set(texts)) > 1  # the seeds differ, so do the answers
    singles = [await chat(s, seed=SEED + i, logprobs=True, top_logprobs=2) for i in range(3)]
    for choice, single in zip(r.choices, singles, strict=True):
        assert choice.message.content == single.choices[0].message.content
        assert choice.finish_reason == single.choices[0].finish_reason == "length"
        assert choice.logprobs.model_dump() == single.choices[0].logprobs.model_dump()
        assert len(choice.logprobs.content) == N
    prompt = singles[0].usage.prompt_tokens
    assert r.usage.prompt_tokens == prompt  # counted once
    assert r.usage.completion_tokens == 3 * N
    assert r.usage.total_tokens == prompt + 3 * N
    assert r.usage.prompt_tokens_details.cached_tokens == 0  # the first choice read it


async def test_n4_prefills_the_prompt_once(serve):
    s = await serve()
    before = s.engine.stats().total_prompt_tokens
    r = await chat(s, n=4, seed=SEED)
    computed = s.engine.stats().total_prompt_tokens - before
    prompt = r.usage.prompt_tokens
    assert prompt > 30
    # the first choice computes the prompt, each other one only its last token
    assert computed == prompt + 3
    finished = s.engine.finished_requests()
    assert len(finished) == 4 and {f.tag for f in finished} == {"api"}
    assert sorted(f.cached_tokens for f in finished) == [0] + [prompt - 1] * 3


async def test_without_a_prefix_cache_each_choice_computes_the_prompt(serve):
    """The counter the test above reads does see a prompt computed four times; the answers
    are the same."""
    shared = await chat(await serve(), n=4, seed=SEED)
    s = await serve(engine={"prefix_cache": False})
    r = await chat(s, n=4, seed=SEED)
    assert s.engine.stats().total_prompt_tokens == 4 * r.usage.prompt_tokens
    assert [c.message.content for c in r.choices] == \
        [c.message.content for c in shared.choices]


async def test_n3_streamed_chunks_carry_their_index_and_assemble_the_choices(qs):
    s = qs
    whole = await chat(s, n=3, seed=SEED)
    stream = await chat(s, n=3, seed=SEED, stream=True, stream_options={"include_usage": True})
    chunks = [c async for c in stream]
    usage = chunks[-1]
    assert usage.choices == []
    assert (usage.usage.prompt_tokens, usage.usage.completion_tokens) == \
        (whole.usage.prompt_tokens, 3 * N)
    # the prompt was cached by `whole` this time
    assert usage.usage.prompt_tokens_details.cached_tokens == whole.usage.prompt_tokens - 1
    by_index: dict[int, list] = {0: [], 1: [], 2: []}
    for c in chunks[:-1]:
        assert len(c.choices) == 1 and c.id == chunks[0].id
        by_index[c.choices[0].index].append(c.choices[0])
    for i, parts in by_index.items():
        assert parts[0].delta.role == "assistant"  # each choice has its own role chunk
        assert [p.finish_reason for p in parts].count("length") == 1
        assert parts[-1].finish_reason == "length"  # ... and its own finish chunk, last
        text = "".join(p.delta.content or "" for p in parts)
        assert text == whole.choices[i].message.content
    # the choices are interleaved, as generated together
    order = [c.choices[0].index for c in chunks[:-1]]
    assert order != sorted(order)


async def test_completions_n2_streamed_and_not(qs):
    s = qs

    async def complete(**kw):
        return await s.client.completions.create(model=MODEL, prompt="Once upon a time",
                                                 **(SAMPLED | kw))

    r = await complete(n=2, seed=SEED, logprobs=2)
    assert [c.index for c in r.choices] == [0, 1]
    for i, choice in enumerate(r.choices):
        single = (await complete(seed=SEED + i, logprobs=2)).choices[0]
        assert choice.text == single.text
        assert choice.logprobs.model_dump() == single.logprobs.model_dump()
    stream = await complete(n=2, seed=SEED, stream=True)
    texts = {0: "", 1: ""}
    async for c in stream:
        texts[c.choices[0].index] += c.choices[0].text
    assert [texts[0], texts[1]] == [c.text for c in r.choices]
    assert r.usage.completion_tokens == 2 * N


async def test_without_a_seed_each_choice_draws_its_own(serve):
    s = await serve()
    r = await chat(s, n=2)
    seeds = [f.seed for f in s.engine.finished_requests()]
    assert len(r.choices) == 2 and len(set(seeds)) == 2


@pytest.mark.parametrize("n", [0, 9])
async def test_n_out_of_range_is_refused_and_nothing_runs(serve, n):
    s = await serve()
    with pytest.raises(openai.BadRequestError) as caught:
        await chat(s, n=n)
    error = caught.value.body
    assert caught.value.status_code == 400
    assert error["param"] == "n" and error["type"] == "invalid_request_error"
    assert "'n' must be" in error["message"]
    assert s.engine.stats().total_prompt_tokens == 0 and not s.engine.has_work()


async def test_a_refusal_refuses_all_n(serve):
    # one running, one queued: the third choice does not fit the queue
    s = await serve(engine={"max_concurrent": 1, "max_queue": 1})
    with pytest.raises(openai.RateLimitError):  # long replies: none ends before the third
        await chat(s, n=3, max_tokens=5000)
    await wait_for(lambda: not s.engine.has_work())
    finished = s.engine.finished_requests()
    assert len(finished) == 2 and {f.finish_reason for f in finished} == {"cancelled"}
    assert s.server.metrics.finished == {}  # no choice was served


async def test_a_client_that_leaves_cancels_every_choice(serve):
    reported = []
    s = await serve(on_finished=reported.append)
    stream = await chat(s, n=3, seed=SEED, max_tokens=5000, stream=True)
    async for _ in stream:
        break
    await stream.close()
    await wait_for(lambda: len(reported) == 3)
    assert {r.finish_reason for r in reported} == {"cancelled"}
    assert all(r.generated_tokens < 5000 for r in reported)
    assert not s.engine.has_work()


async def test_each_choice_is_counted_as_a_request(serve):
    reported = []
    s = await serve(on_finished=reported.append)
    await chat(s, n=3, seed=SEED)
    assert len(reported) == 3 and {r.finish_reason for r in reported} == {"length"}
    assert len({r.request_id for r in reported}) == 3
    assert all(r.request_id.startswith("api-") for r in reported)
    assert s.server.metrics.finished == {"length": 3}
    assert 'finished_reason="length"} 3' in s.server.metrics.render(s.engine.stats())
