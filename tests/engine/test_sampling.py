"""Per-request sampling: each row of a shared batch gets its own parameters."""

from mlx_lm.sample_utils import make_logits_processors

from engine import SamplingParams
from tests.engine.conftest import prompts, reference_tokens, run_to_end

N = 20


def test_mixed_params_share_a_batch_and_each_gets_its_own(tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    p1, p2, p3, p4 = prompts(4, seed=5)
    greedy = engine.submit(prompt_tokens=p1, params=SamplingParams(max_tokens=N))
    penalty = engine.submit(
        prompt_tokens=p2, params=SamplingParams(max_tokens=N, repetition_penalty=1.5)
    )
    # top_p tiny or top_k=1 keep only the best token: temperature > 0 must then equal greedy.
    nucleus = engine.submit(
        prompt_tokens=p3, params=SamplingParams(max_tokens=N, temperature=1.0, top_p=1e-6)
    )
    topk = engine.submit(
        prompt_tokens=p4, params=SamplingParams(max_tokens=N, temperature=2.0, top_k=1)
    )
    run_to_end(engine)
    assert max(t.decode_rows for t in engine.telemetry()) == 4
    assert greedy.tokens == reference_tokens(tiny.model, p1, N)
    assert penalty.tokens == reference_tokens(
        tiny.model, p2, N, logits_processors=make_logits_processors(repetition_penalty=1.5)
    )
    assert penalty.tokens != reference_tokens(tiny.model, p2, N)  # the penalty did something
    assert nucleus.tokens == reference_tokens(tiny.model, p3, N)
    assert topk.tokens == reference_tokens(tiny.model, p4, N)


def test_seeded_request_reproduces_alone_and_inside_a_batch(tiny, make_engine):
    prompt = prompts(1, seed=9)[0]
    params = SamplingParams(temperature=1.0, seed=1234, max_tokens=N)
    alone = make_engine()
    s_alone = alone.submit(prompt_tokens=prompt, params=params)
    run_to_end(alone)

    crowded = make_engine(max_concurrent=6)
    others = [crowded.submit(prompt_tokens=p, params=SamplingParams(temperature=0.8,
                             max_tokens=N)) for p in prompts(4, seed=2)]
    s_batch = crowded.submit(prompt_tokens=prompt, params=params)
    run_to_end(crowded)
    assert all(o.finish_reason == "length" for o in others)
    assert s_batch.tokens == s_alone.tokens
    assert s_batch.stats.seed == 1234

    other_seed = make_engine()
    s_other = other_seed.submit(prompt_tokens=prompt,
                                params=SamplingParams(temperature=1.0, seed=99, max_tokens=N))
    run_to_end(other_seed)
    assert s_other.tokens != s_alone.tokens


def test_unseeded_requests_record_the_seed_that_reproduces_them(tiny, make_engine):
    prompt = prompts(1, seed=4)[0]
    engine = make_engine()
    first = engine.submit(prompt_tokens=prompt, params=SamplingParams(temperature=1.0,
                                                                      max_tokens=N))
    run_to_end(engine)
    again = engine.submit(prompt_tokens=prompt, params=SamplingParams(
        temperature=1.0, max_tokens=N, seed=first.stats.seed))
    run_to_end(engine)
    assert again.tokens == first.tokens
