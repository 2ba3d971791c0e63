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


def test_batched_repetition_penalty_equals_mlx_lm_processor_per_row() -> None:
    """engine.sampling.penalize_rows (issue #26: one gather/scale/scatter for the batch)
    gives bitwise the logits each row's own mlx-lm processor gives, with and without a
    pending (run-ahead) token, for rows with other penalties, windows, short or no history."""
    import mlx.core as mx
    import numpy as np

    from engine.sampling import RowSampler, penalize_rows

    rng = np.random.default_rng(5)
    logits = mx.array(rng.normal(0, 3, (5, 300)).astype(np.float32))
    samplers = [RowSampler(SamplingParams(temperature=0.7, repetition_penalty=1.1), 1),
                RowSampler(SamplingParams(temperature=0.7), 2),  # no penalty
                RowSampler(SamplingParams(temperature=0.7, repetition_penalty=1.3,
                                          repetition_context_size=5), 3),
                RowSampler(SamplingParams(temperature=0.7, repetition_penalty=1.1), 4),
                RowSampler(SamplingParams(temperature=0.7, repetition_penalty=0.9), 5)]
    histories = [[int(t) for t in rng.integers(0, 300, n)] for n in (40, 12, 9, 0, 3)]
    histories[0][:5] = [7, 7, 7, 8, 7]  # repeats
    pending = mx.array([11, 12, 13, 14, 7], dtype=mx.uint32)
    for last in (None, pending):
        got = np.array(penalize_rows(samplers, histories, logits, last))
        for i, s in enumerate(samplers):
            want = np.array(s.process(histories[i], logits[i : i + 1],
                                      None if last is None else last[i : i + 1]))
            assert np.array_equal(got[i], want[0]), (i, last is None)
    assert not np.array_equal(got[0], np.array(logits[0]))  # the penalty really applied


def test_a_penalty_window_shorter_than_the_history_alone_and_batched(tiny, make_engine):
    """The penalty reads the last repetition_context_size tokens of prompt and output, in
    the first token sampled in prefill, in batched steps and in the lone row's run-ahead."""
    prompt = prompts(4, seed=13)[3]  # 40 tokens, far longer than the window
    params = SamplingParams(max_tokens=N, repetition_penalty=1.8, repetition_context_size=4)
    want = reference_tokens(tiny.model, prompt, N, logits_processors=make_logits_processors(
        repetition_penalty=1.8, repetition_context_size=4))
    assert want != reference_tokens(tiny.model, prompt, N, logits_processors=(
        make_logits_processors(repetition_penalty=1.8, repetition_context_size=40)))
    alone = make_engine()
    a = alone.submit(prompt_tokens=prompt, params=params)
    run_to_end(alone)
    batched = make_engine(max_concurrent=4)
    b = batched.submit(prompt_tokens=prompt, params=params)
    for other in prompts(3, seed=14):
        batched.submit(prompt_tokens=other, params=SamplingParams(max_tokens=N))
    run_to_end(batched)
    assert a.tokens == b.tokens == want
