"""A failing tick fails only its own requests; invalid requests are refused at submit."""

import pytest

from engine import RequestRejected, SamplingParams, testing
from tests.engine.conftest import prompts, reference_tokens, run_to_end


def test_error_in_decode_fails_that_ticks_requests_and_engine_keeps_serving(tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    a, b = (engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=20))
            for p in prompts(2))
    engine.step()
    runner = testing.internals(engine).runner  # fault injection
    real = runner.decode
    calls = {"n": 0}

    def broken(cache, tokens):
        calls["n"] += 1
        raise RuntimeError("simulated device fault")

    runner.decode = broken
    engine.step()
    runner.decode = real
    assert a.finish_reason == b.finish_reason == "error"
    assert "simulated device fault" in a.error and a.stats.error == a.error
    assert engine.stats().failed == 2

    prompt = prompts(1, seed=8)[0]
    after = engine.submit(prompt_tokens=prompt, params=SamplingParams(max_tokens=10))
    run_to_end(engine)
    assert after.tokens == reference_tokens(tiny.model, prompt, 10)


def test_error_in_one_prefill_fails_only_that_request(tiny, make_engine):
    engine = make_engine(max_concurrent=4)
    good_prompt = prompts(1, seed=12)[0]
    good = engine.submit(prompt_tokens=good_prompt, params=SamplingParams(max_tokens=8))
    bad = engine.submit(prompt_tokens=[7] * 10, params=SamplingParams(max_tokens=8))
    runner = testing.internals(engine).runner  # fault injection
    real, real_ragged = runner.prefill, runner.ragged

    def picky(cache, tokens, **kw):
        if tokens == [7] * 10:
            raise ValueError("bad chunk")
        return real(cache, tokens, **kw)

    def picky_ragged(decode, tokens, chunks, logits):
        if any(piece == [7] * 10 for _, piece in chunks):
            raise ValueError("bad chunk")  # the whole pass fails: the tick runs apart
        return real_ragged(decode, tokens, chunks, logits)

    runner.prefill = picky
    runner.ragged = picky_ragged
    run_to_end(engine)
    assert bad.finish_reason == "error" and "bad chunk" in bad.error
    assert good.tokens == reference_tokens(tiny.model, good_prompt, 8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"messages": [{"role": "user", "content": "   "}]}, "empty prompt"),
        ({"messages": []}, "empty prompt"),
        ({"prompt_tokens": []}, "empty prompt"),
        ({"prompt_tokens": [1] * 600}, "context holds 512"),
        ({"prompt_tokens": [1], "params": {"temperature": -0.5}}, "temperature must be >= 0"),
        ({"prompt_tokens": [1], "params": {"top_p": 0.0}}, r"top_p must be in \(0, 1\]"),
        ({"prompt_tokens": [1], "params": {"top_p": 1.5}}, r"top_p must be in \(0, 1\]"),
        ({"prompt_tokens": [1], "params": {"max_tokens": 0}}, "max_tokens must be >= 1"),
        ({"prompt_tokens": [1], "params": {"temprature": 0.5}},
         "unknown sampling field.*temprature"),
        ({"prompt_tokens": [1], "colour": "red"}, "unknown request field.*colour"),
        ({"prompt_tokens": [1], "priority": "urgent"}, "priority must be"),
        ({"prompt_tokens": [1, 99999]}, "invalid token ids"),
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "role in"),
        ({"prompt_tokens": [1], "params": {"stop": [""]}}, "stop strings must be non-empty"),
        ({}, "exactly one of messages or prompt_tokens"),
    ],
)
def test_invalid_requests_are_refused_naming_the_problem(make_engine, kwargs, message):
    engine = make_engine()
    with pytest.raises(RequestRejected, match=message):
        engine.submit(**kwargs)
    assert not engine.has_work()


def test_messages_go_through_the_chat_template(tiny, make_engine):
    engine = make_engine()
    stream = engine.submit(messages=[{"role": "user", "content": "Hi"}],
                           params=SamplingParams(max_tokens=3))
    expected = tiny.tokenizer.encode(
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    assert stream.prompt_tokens == expected
    run_to_end(engine)
    assert len(stream.tokens) == 3
