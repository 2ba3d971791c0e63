"""Issue #25 through the OpenAI-compatible server and the official `openai` client: the same
chat request gets the identical reply (text, per-token log-probabilities and alternatives)
sent alone, again as a prefix-cache hit, streamed, and while other requests run.

The reference is computed on the same model without the server, in the simplest way: the
request alone on an engine that prefills one token a tick, with no prefix cache. The model
is a tiny llama quantized as the bundled model is, so the engine's native int8 kernels run.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from openai import AsyncOpenAI

from engine import Engine, SamplingParams
from tests.engine.conftest import engine_on, native_quantized_tiny, run_to_end
from tests.server.conftest import serving, wait_for

MODEL = "tiny-q4"
N = 16
TOP = 3
MESSAGES = [{"role": "system", "content": "Answer in one line."},
            {"role": "user", "content": "Why is the sea salty? Explain it briefly."}]
GREEDY: dict[str, Any] = {"temperature": 0}
SEEDED: dict[str, Any] = {"temperature": 0.8, "top_p": 0.9, "seed": 4242}


@pytest.fixture(scope="module")
def qtiny():
    return native_quantized_tiny(seed=17)


@dataclass(frozen=True)
class Reply:
    text: str
    # per token: (token text, logprob, ((alternative text, logprob), ...))
    logprobs: tuple[tuple[str, float, tuple[tuple[str, float], ...]], ...]


def reference(tiny: Any, sampling: dict[str, Any]) -> Reply:
    """The request alone, its prompt one token a tick, no prefix cache, no server."""
    engine = engine_on(tiny, max_concurrent=1, prefill_burst=1, whole_prompt_tokens=0,
                       prefix_cache=False)
    params = SamplingParams(max_tokens=N, logprobs=TOP, **sampling)
    stream = engine.submit(messages=MESSAGES, params=params)
    events: list[Any] = []
    stream.listen(lambda e: events.append(e) if e.token is not None else None)
    run_to_end(engine)
    assert stream.finish_reason == "length" and len(events) == N

    def text(t: int) -> str:
        return tiny.tokenizer.decode([t])

    return Reply(stream.text, tuple(
        (text(e.token), e.logprob, tuple((text(t), v) for t, v in e.top_logprobs))
        for e in events))


@dataclass
class Served:
    engine: Engine
    client: AsyncOpenAI
    references: dict[str, Reply]


@pytest.fixture
async def served(qtiny) -> AsyncIterator[Served]:
    refs = {"greedy": reference(qtiny, GREEDY), "seeded": reference(qtiny, SEEDED)}
    async with serving(engine_on(qtiny, max_concurrent=16), MODEL) as s:
        yield Served(s.engine, s.client, refs)


async def ask(s: Served, sampling: dict[str, Any], stream: bool = False) -> tuple[Reply, Any]:
    """The request under test; returns its reply and usage."""
    r = await s.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=N, logprobs=True, top_logprobs=TOP,
        stream=stream, stream_options={"include_usage": True} if stream else None, **sampling)
    if stream:
        chunks = [c async for c in r]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        entries = [e for c in chunks if c.choices and c.choices[0].logprobs
                   for e in c.choices[0].logprobs.content]
        finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
        usage = chunks[-1].usage
    else:
        text, entries = r.choices[0].message.content, r.choices[0].logprobs.content
        finish, usage = r.choices[0].finish_reason, r.usage
    assert finish == "length"
    return Reply(text, tuple(
        (e.token, e.logprob, tuple((a.token, a.logprob) for a in e.top_logprobs))
        for e in entries)), usage


async def others_running(s: Served, count: int, seed: int) -> list[asyncio.Task]:
    """`count` other requests (chat and text completions, greedy and drawn, streamed or
    not, long enough to outlast the request under test), started and decoding."""
    rng = random.Random(seed)

    async def one(i: int) -> None:
        sampling = rng.choice([{"temperature": 0}, {"temperature": 1.0},
                               {"temperature": 0.7, "top_p": 0.95, "seed": rng.randrange(99)},
                               dict(SEEDED)])
        n = rng.randint(150, 300)
        if i % 2:
            prompt = [rng.randrange(256) for _ in range(rng.randint(1, 90))]
            await s.client.completions.create(model=MODEL, prompt=prompt, max_tokens=n,
                                              **sampling)
        else:
            words = " ".join(rng.choice(["sea", "moon", "salt", "why", "rain"])
                             for _ in range(rng.randint(1, 30)))
            r = await s.client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": words}], max_tokens=n,
                stream=True, **sampling)
            async for _ in r:
                pass

    before = len(s.engine.finished_requests())
    tasks = [asyncio.create_task(one(i)) for i in range(count)]
    await wait_for(lambda: s.engine.stats().decoding >= min(count, 3), tries=2000)
    assert len(s.engine.finished_requests()) == before
    return tasks


@pytest.mark.parametrize("kind", ["greedy", "seeded"])
async def test_the_same_request_gets_the_same_reply_alone_cached_streamed_and_in_a_crowd(
        served, kind) -> None:
    """Four times: alone, again (a prefix-cache hit), streamed, and while other requests
    run; then twice at once, amid others. Every reply equals the reference."""
    s = served
    sampling = GREEDY if kind == "greedy" else SEEDED
    want = s.references[kind]

    first, usage = await ask(s, sampling)
    assert usage.prompt_tokens_details.cached_tokens == 0
    again, usage = await ask(s, sampling)
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens - 1
    streamed, _ = await ask(s, sampling, stream=True)

    crowd = await others_running(s, 6, seed=1)
    busy, _ = await ask(s, sampling)
    assert not all(t.done() for t in crowd), "the others finished before the request"
    both = await asyncio.gather(ask(s, sampling), ask(s, sampling, stream=True))
    await asyncio.gather(*crowd)
    assert first == want
    assert [again, streamed, busy, *(r for r, _ in both)] == [want] * 5


async def test_a_seeded_request_differs_from_greedy_and_with_another_seed(served) -> None:
    """The seeded replies above are draws: another seed gives another reply (so equal
    replies are not an accident of the sampling settings)."""
    s = served
    seeded, _ = await ask(s, SEEDED)
    other, _ = await ask(s, dict(SEEDED, seed=SEEDED["seed"] + 1))
    assert seeded == s.references["seeded"]
    assert other != seeded
    assert s.references["seeded"] != s.references["greedy"]


async def test_the_same_reply_while_the_server_is_loaded_with_a_burst(served) -> None:
    """The greedy and seeded requests arrive in the middle of a burst of 12 requests."""
    s = served
    crowd = await others_running(s, 12, seed=2)
    replies = await asyncio.gather(ask(s, GREEDY), ask(s, SEEDED), ask(s, GREEDY, stream=True),
                                   ask(s, SEEDED, stream=True))
    assert not all(t.done() for t in crowd)
    await asyncio.gather(*crowd)
    got = [r for r, _ in replies]
    want = s.references
    assert got == [want["greedy"], want["seeded"], want["greedy"], want["seeded"]]
