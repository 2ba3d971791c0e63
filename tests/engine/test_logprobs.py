"""Per-token log-probabilities (SamplingParams.logprobs): exact against mlx-lm's own logits."""

import mlx.core as mx
import pytest

from engine import SamplingParams
from tests.engine.conftest import prompts, reference_tokens, run_to_end

N = 12


def reference_logprobs(model, prompt: list[int], tokens: list[int]) -> mx.array:
    """log_softmax of mlx-lm's logits at each generated position (one full forward pass)."""
    logits = model(mx.array([prompt + tokens]))[0].astype(mx.float32)
    rows = logits[len(prompt) - 1 : len(prompt) - 1 + len(tokens)]
    return rows - mx.logsumexp(rows, axis=-1, keepdims=True)


def check(model, prompt, stream, k):
    lp = reference_logprobs(model, prompt, stream.tokens)
    events = stream.events
    assert len(events) == len(stream.tokens)
    for pos, (token, event) in enumerate(zip(stream.tokens, events, strict=True)):
        assert event.token == token
        assert event.logprob == pytest.approx(lp[pos, token].item(), abs=2e-4)
        assert len(event.top_logprobs) == k
        best = mx.argsort(-lp[pos])[:k].tolist()
        assert [t for t, _ in event.top_logprobs] == best
        for t, value in event.top_logprobs:
            assert value == pytest.approx(lp[pos, t].item(), abs=2e-4)
        if k:  # greedy: the chosen token is the most likely one
            assert event.top_logprobs[0][0] == token


def submit_collecting(engine, prompt, params):
    stream = engine.submit(prompt_tokens=prompt, params=params)
    stream.events = []
    push = stream._push

    def keep(event):
        if event.token is not None:
            stream.events.append(event)
        push(event)

    stream._push = keep
    return stream


@pytest.mark.parametrize("k", [0, 3])
def test_logprobs_alone_and_in_a_batch_equal_mlx_lm(tiny, make_engine, k):
    engine = make_engine(max_concurrent=4)
    ps = prompts(3, seed=11)
    asking = submit_collecting(engine, ps[0], SamplingParams(max_tokens=N, logprobs=k))
    others = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=N)) for p in ps[1:]]
    run_to_end(engine)
    assert max(t.decode_rows for t in engine.telemetry()) == 3
    assert asking.tokens == reference_tokens(tiny.model, ps[0], N)
    check(tiny.model, ps[0], asking, k)
    assert all(o.finish_reason == "length" for o in others)

    alone = make_engine()
    solo = submit_collecting(alone, ps[0], SamplingParams(max_tokens=N, logprobs=k))
    run_to_end(alone)
    check(tiny.model, ps[0], solo, k)


def test_no_logprobs_unless_asked(make_engine):
    engine = make_engine()
    stream = submit_collecting(engine, prompts(1)[0], SamplingParams(max_tokens=4))
    run_to_end(engine)
    assert all(e.logprob is None and e.top_logprobs is None for e in stream.events)


def test_logprobs_is_validated():
    with pytest.raises(ValueError, match="logprobs must be <= 20"):
        SamplingParams(logprobs=21)
    with pytest.raises(ValueError, match="logprobs must be >= 0"):
        SamplingParams(logprobs=-1)
