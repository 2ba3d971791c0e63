"""Several answers to one prompt (Engine.submit's share_prompt_with): the prompt is prefilled
once, and every answer is the one its request gives alone with the same seed (tokens and
log-probabilities: the model is a tiny llama quantized as the bundled model is, so the
engine's native kernels run, whose answers do not depend on the batch)."""

from __future__ import annotations

import pytest

from engine import SamplingParams
from tests.engine.conftest import engine_on, native_quantized_tiny, prompts, run_to_end

N = 10
SEED = 4242


def sampled(seed: int) -> SamplingParams:
    return SamplingParams(max_tokens=N, temperature=0.9, top_p=0.95, seed=seed, logprobs=2)


@pytest.fixture(scope="module")
def make_engine(qtiny):
    """`make_engine(**config)`: an engine (not started) on the quantized tiny model."""
    return lambda **config: engine_on(qtiny, **config)


@pytest.fixture(scope="module")
def qtiny():
    return native_quantized_tiny(seed=29)


def answer(engine, **submit) -> tuple:
    """Submit; a function that reads the answer once the engine ran: (tokens, logprobs)."""
    events: list = []
    stream = engine.submit(**submit)
    stream.listen(lambda e: events.append((e.token, e.logprob, e.top_logprobs))
                  if e.token is not None else None)
    return stream, events


def solo(make_engine, prompt: list[int], seed: int) -> list:
    """The request alone, on a fresh engine without a prefix cache: its token events."""
    engine = make_engine(prefix_cache=False)
    stream, events = answer(engine, prompt_tokens=prompt, params=sampled(seed))
    run_to_end(engine)
    assert stream.finish_reason == "length"
    return events


def answers(engine, prompt: list[int], n: int, share: bool = True) -> tuple[list, list]:
    """n requests for one prompt submitted together, seeds SEED + i; the first one leads.
    Their streams, and their token events."""
    runs = [answer(engine, prompt_tokens=prompt, params=sampled(SEED))]
    for i in range(1, n):
        runs.append(answer(engine, prompt_tokens=prompt, params=sampled(SEED + i),
                           share_prompt_with=runs[0][0].request_id if share else None))
    run_to_end(engine)
    return [s for s, _ in runs], [e for _, e in runs]


@pytest.fixture(scope="module")
def prompt() -> list[int]:
    return prompts(4, seed=29)[3] * 3  # 120 tokens: several prefill ticks at burst 32


@pytest.fixture(scope="module")
def references(make_engine, prompt) -> list[list]:
    return [solo(make_engine, prompt, SEED + i) for i in range(4)]


def test_followers_reuse_the_prompt_and_answer_as_alone(make_engine, prompt, references):
    engine = make_engine(max_concurrent=8, prefill_burst=32)
    streams, events = answers(engine, prompt, 4)
    assert events == references  # tokens and log-probabilities
    assert len({tuple(s.tokens) for s in streams}) == 4  # the seeds give different answers
    # the prompt was computed once: each follower ran only its last token
    assert engine.stats().total_prompt_tokens == len(prompt) + 3
    assert [s.stats.cached_tokens for s in streams] == [0] + [len(prompt) - 1] * 3


def test_without_sharing_each_prompt_is_computed(make_engine, prompt, references):
    engine = make_engine(max_concurrent=8, prefill_burst=32)
    _, events = answers(engine, prompt, 4, share=False)
    assert events == references
    assert engine.stats().total_prompt_tokens == 4 * len(prompt)


def test_without_a_prefix_cache_followers_prefill_themselves(make_engine, prompt, references):
    engine = make_engine(max_concurrent=8, prefill_burst=32, prefix_cache=False)
    _, events = answers(engine, prompt, 3)
    assert events == references[:3]
    assert engine.stats().total_prompt_tokens == 3 * len(prompt)


def test_a_leader_cancelled_while_prefilling_releases_its_followers(make_engine, prompt,
                                                                    references):
    engine = make_engine(max_concurrent=8, prefill_burst=16)
    lead = engine.submit(prompt_tokens=prompt, params=sampled(SEED))
    follow, events = answer(engine, prompt_tokens=prompt, params=sampled(SEED + 1),
                            share_prompt_with=lead.request_id)
    engine.step()
    engine.step()
    # the follower waits (queued) while the leader reads its prompt
    progress = engine.request_progress()
    assert progress[follow.request_id].state == "queued"
    assert progress[lead.request_id].state == "prefilling"
    lead.cancel()
    run_to_end(engine)
    assert lead.finish_reason == "cancelled"
    assert follow.finish_reason == "length" and events == references[1]


def test_a_finished_or_unknown_leader_is_ignored(make_engine, prompt, references):
    engine = make_engine()
    done, first = answer(engine, prompt_tokens=prompt, params=sampled(SEED))
    run_to_end(engine)
    later, second = answer(engine, prompt_tokens=prompt, params=sampled(SEED + 2),
                           share_prompt_with=done.request_id)
    other, third = answer(engine, prompt_tokens=prompt, params=sampled(SEED + 3),
                          share_prompt_with="no-such-request")
    run_to_end(engine)
    assert [first, second, third] == [references[0], references[2], references[3]]
    # the finished request's KV was kept: both reused it
    assert later.stats.cached_tokens == other.stats.cached_tokens == len(prompt) - 1


def test_a_bad_share_prompt_with_is_refused(make_engine):
    from engine import RequestRejected

    engine = make_engine()
    with pytest.raises(RequestRejected, match="share_prompt_with"):
        engine.submit(prompt_tokens=[1, 2, 3], share_prompt_with=7)
