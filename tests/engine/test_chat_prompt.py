"""Chat prompts: a reply's generated ids are spliced back into the next turn's prompt."""

import pytest

from engine import RequestRejected, SamplingParams
from tests.engine.conftest import reference_tokens, run_to_end

SYSTEM = {"role": "system", "content": "Be brief."}


def ask(engine, messages, n: int = 10):
    stream = engine.submit(messages=messages, params=SamplingParams(max_tokens=n))
    run_to_end(engine)
    return stream


def encode(tiny, text: str) -> list[int]:
    return list(tiny.tokenizer.encode(text, add_special_tokens=False))


def test_next_turn_starts_with_the_generated_ids_and_reuses_all_of_them(tiny, make_engine):
    engine = make_engine()
    first_msgs = [SYSTEM, {"role": "user", "content": "Name a colour."}]
    first = ask(engine, first_msgs)
    reply = {"role": "assistant", "content": first.text, "token_ids": first.tokens}
    second = ask(engine, first_msgs + [reply, {"role": "user", "content": "Another?"}])
    head = first.prompt_tokens + first.tokens
    assert second.prompt_tokens[: len(head)] == head
    assert second.stats.cached_tokens == len(head) - 1  # all but the last (never fed) id
    assert second.tokens == reference_tokens(tiny.model, second.prompt_tokens, 10)


def test_ids_that_text_would_tokenize_differently_are_kept(tiny, make_engine):
    # The reply spelled out "<|im_end|>" byte by byte: tokenizing its text would turn it
    # into the control token (and end the cache reuse there).
    engine = make_engine()
    literal = [tok for ch in "<|im_end|>" for tok in encode(tiny, ch)]
    ids = encode(tiny, "ok ") + literal
    content = "ok <|im_end|>"
    msgs = [{"role": "user", "content": "Say it."},
            {"role": "assistant", "content": content, "token_ids": ids},
            {"role": "user", "content": "Again."}]
    with_ids = engine.submit(messages=msgs, params=SamplingParams(max_tokens=1))
    as_text = engine.submit(messages=[{k: v for k, v in m.items() if k != "token_ids"}
                                      for m in msgs], params=SamplingParams(max_tokens=1))
    run_to_end(engine)
    end_id = tiny.tokenizer.convert_tokens_to_ids("<|im_end|>")
    head = encode(tiny, tiny.tokenizer.apply_chat_template(
        msgs[:1], add_generation_prompt=True, tokenize=False))
    assert with_ids.prompt_tokens[: len(head) + len(ids)] == head + ids
    assert as_text.prompt_tokens.count(end_id) == with_ids.prompt_tokens.count(end_id) + 1


def test_ids_that_no_longer_match_the_text_are_ignored(tiny, make_engine):
    engine = make_engine()
    msgs = [{"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "edited by hand", "token_ids": encode(tiny, "x")},
            {"role": "user", "content": "Go on"}]
    stream = engine.submit(messages=msgs, params=SamplingParams(max_tokens=1))
    plain = tiny.tokenizer.apply_chat_template(
        [{k: v for k, v in m.items() if k != "token_ids"} for m in msgs],
        add_generation_prompt=True, tokenize=False)
    assert stream.prompt_tokens == encode(tiny, plain)


def test_the_end_token_a_reply_stopped_on_is_not_part_of_its_text(tiny, make_engine):
    end_id = tiny.tokenizer.convert_tokens_to_ids("<|im_end|>")
    engine = make_engine(eos=[end_id])
    literal = [tok for ch in "<|im_end|>" for tok in encode(tiny, ch)]
    msgs = [{"role": "user", "content": "Say it."},
            {"role": "assistant", "content": "<|im_end|>", "token_ids": literal + [end_id]},
            {"role": "user", "content": "Again."}]
    stream = engine.submit(messages=msgs, params=SamplingParams(max_tokens=1))
    head = encode(tiny, tiny.tokenizer.apply_chat_template(
        msgs[:1], add_generation_prompt=True, tokenize=False))
    # Spliced (the ids still match the text once the end token is dropped), and the
    # template's own end-of-turn marker follows.
    assert stream.prompt_tokens[: len(head) + len(literal) + 1] == head + literal + [end_id]


@pytest.mark.parametrize("bad", [
    {"role": "assistant", "content": "x", "token_ids": "abc"},
    {"role": "assistant", "content": "x", "token_ids": [1, -5]},
    {"role": "assistant", "content": "x", "token_ids": [10**9]},
    {"role": "user", "content": "x", "token_ids": [1]},
])
def test_bad_token_ids_are_refused_naming_the_message(make_engine, bad):
    engine = make_engine()
    with pytest.raises(RequestRejected, match=r"messages\[1\]\.token_ids"):
        engine.submit(messages=[{"role": "user", "content": "Hi"}, bad],
                      params=SamplingParams(max_tokens=1))
