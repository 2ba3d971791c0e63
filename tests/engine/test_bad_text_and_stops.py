"""Text the tokenizer cannot take and unbounded stop strings are refused at submit, naming
the problem, and the engine keeps serving (issue #15, items 1 and 6)."""

import pytest

from engine import Engine, RequestRejected, SamplingParams
from engine.sampling_params import MAX_STOP_LENGTH, MAX_STOP_STRINGS
from tests.engine.conftest import run_to_end


def test_a_lone_surrogate_in_a_message_is_refused_naming_message_and_character(make_engine):
    engine = make_engine()
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi \ud800 there"}]
    with pytest.raises(RequestRejected,
                       match=r"messages\[1\]\.content holds a lone surrogate "
                             r"\(U\+D800 at character 3\)"):
        engine.submit(messages=messages)
    assert not engine.has_work()
    ok = engine.submit(messages=[{"role": "user", "content": "hi there"}],
                       params=SamplingParams(max_tokens=3))
    run_to_end(engine)
    assert ok.finish_reason == "length" and len(ok.tokens) == 3


def test_a_lone_surrogate_in_a_stop_string_is_refused():
    with pytest.raises(ValueError, match=r"stop\[1\] holds a lone surrogate \(U\+DC00"):
        SamplingParams(stop=["ok", "x\udc00"])


def test_too_many_stop_strings_are_refused_with_the_limit(make_engine):
    engine = make_engine()
    params = {"stop": [f"s{i}" for i in range(MAX_STOP_STRINGS + 1)]}
    with pytest.raises(RequestRejected,
                       match=f"stop holds {MAX_STOP_STRINGS + 1} strings; "
                             f"at most {MAX_STOP_STRINGS} are allowed"):
        engine.submit(prompt_tokens=[1, 2], params=params)
    assert not engine.has_work()


def test_a_too_long_stop_string_is_refused_with_the_limit():
    with pytest.raises(ValueError, match=f"stop\\[0\\] is {MAX_STOP_LENGTH + 1} characters "
                                         f"long; at most {MAX_STOP_LENGTH} are allowed"):
        SamplingParams(stop=["x" * (MAX_STOP_LENGTH + 1)])


def test_stop_strings_at_the_limits_are_accepted():
    params = SamplingParams(stop=["x" * MAX_STOP_LENGTH] * MAX_STOP_STRINGS)
    assert len(params.stop) == MAX_STOP_STRINGS


def test_stop_of_the_wrong_kind_is_refused_naming_it():
    with pytest.raises(ValueError, match="stop must be a string or a list of strings"):
        SamplingParams(stop=42)  # type: ignore[arg-type]


def engine_with_template(tiny, template: str):
    from tests.tiny_model import make_tokenizer

    tokenizer = make_tokenizer()
    tokenizer._tokenizer.chat_template = template
    return Engine(tiny.model, tokenizer, eos_token_ids=[],
                  context_length=tiny.context_length), tokenizer


def test_a_chat_template_that_raises_is_a_refusal_naming_it(tiny):
    engine, _ = engine_with_template(tiny, (
        "{% for m in messages %}{% if m['role'] == 'user' and loop.index0 % 2 == 0 %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant') }}{% endif %}"
        "{{ m['content'] }}{% endfor %}"))
    with pytest.raises(RequestRejected, match="chat template.*roles must alternate"):
        engine.submit(messages=[{"role": "user", "content": "u"}])
    assert not engine.has_work()


def test_a_template_without_a_system_role_gets_the_system_prompt_in_the_user_turn(tiny):
    """As llama.cpp does for such templates (Gemma 2's): not a refusal."""
    engine, tokenizer = engine_with_template(tiny, (
        "{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"))
    stream = engine.submit(messages=[{"role": "system", "content": "Be brief."},
                                     {"role": "user", "content": "Hi"}])
    assert tokenizer.decode(stream.prompt_tokens) == "<user>Be brief.\n\nHi"
