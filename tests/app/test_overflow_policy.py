"""The context overflow policy (app/request/overflow.py) on real chats, counted by the
tiny model's real chat template and byte tokenizer: what is kept, what is dropped, and that
a reply always has its room."""

from __future__ import annotations

import pytest

from app.request.overflow import Dropped, Policy, fit, parse_policy, turns
from tests.tiny_model import make_tokenizer

TOKENIZER = make_tokenizer()


def count(messages: list) -> int:
    rendered = [{"role": m["role"], "content": m.get("content") or
                 str(m.get("tool_calls") or "")} for m in messages]
    return len(TOKENIZER.apply_chat_template(rendered, add_generation_prompt=True,
                                             tokenize=True))


def chat(n_turns: int, *, with_tools: bool = False) -> list[dict]:
    out = [{"role": "system", "content": "You are terse."}]
    for i in range(n_turns):
        out.append({"role": "user", "content": f"question {i}: " + "x" * 40})
        if with_tools and i % 3 == 1:
            call = {"id": f"c{i}", "type": "function",
                    "function": {"name": "look", "arguments": "{}"}}
            out.append({"role": "assistant", "content": "", "tool_calls": [call]})
            out.append({"role": "tool", "tool_call_id": f"c{i}", "content": "y" * 30})
        out.append({"role": "assistant", "content": f"answer {i}: " + "z" * 40})
    out.append({"role": "user", "content": "the last question"})
    return out


def test_names_ours_and_lm_studios() -> None:
    assert parse_policy("truncate_middle") is Policy.TRUNCATE_MIDDLE
    assert parse_policy("rollingWindow") is Policy.ROLLING_WINDOW
    assert parse_policy("stopAtLimit") is Policy.STOP
    with pytest.raises(ValueError, match="truncate_middle"):
        parse_policy("shift")
    with pytest.raises(ValueError):
        parse_policy(3)


def test_stop_and_a_chat_that_fits_are_unchanged() -> None:
    messages = chat(30)
    assert fit(messages, count, context_length=400, answer_room=64,
               policy=Policy.STOP) == (messages, Dropped())
    small = chat(2)
    assert fit(small, count, context_length=4096, answer_room=64,
               policy=Policy.ROLLING_WINDOW) == (small, Dropped())


@pytest.mark.parametrize("policy", [Policy.TRUNCATE_MIDDLE, Policy.ROLLING_WINDOW])
def test_fits_with_room_for_the_answer(policy: Policy) -> None:
    messages = chat(30)
    full = count(messages)
    out, dropped = fit(messages, count, context_length=800, answer_room=200, policy=policy)
    assert count(out) <= 800 - 200
    assert dropped.messages == len(messages) - len(out) > 0
    assert dropped.tokens == full - count(out)
    # the fewest turns: one more turn back would not fit
    assert out[0] == messages[0]  # the system prompt
    assert out[-1] == messages[-1]  # the message being answered
    # what is kept is the messages as they were, in order
    assert all(m in messages for m in out)
    assert [messages.index(m) for m in out] == sorted(messages.index(m) for m in out)


def test_truncate_middle_keeps_the_first_turn_rolling_window_does_not() -> None:
    messages = chat(30)
    middle, _ = fit(messages, count, context_length=800, answer_room=200,
                    policy=Policy.TRUNCATE_MIDDLE)
    rolling, _ = fit(messages, count, context_length=800, answer_room=200,
                     policy=Policy.ROLLING_WINDOW)
    assert middle[1:3] == messages[1:3]  # question 0 and its answer
    assert rolling[1] != messages[1]
    assert rolling[1]["role"] == "user"  # roles still alternate after the system prompt
    # rolling keeps a suffix: the latest turns, whole
    assert rolling[1:] == messages[-(len(rolling) - 1):]


def test_the_fewest_turns_are_dropped() -> None:
    messages = chat(30)
    out, _ = fit(messages, count, context_length=800, answer_room=200,
                 policy=Policy.ROLLING_WINDOW)
    system, kept_turns = turns(out)
    _, all_turns = turns(messages)
    one_more = system + [m for t in all_turns[-(len(kept_turns) + 1):] for m in t]
    assert count(one_more) > 800 - 200


@pytest.mark.parametrize("policy", [Policy.TRUNCATE_MIDDLE, Policy.ROLLING_WINDOW])
def test_tool_calls_keep_their_results(policy: Policy) -> None:
    messages = chat(30, with_tools=True)
    for context in range(500, 1600, 37):  # many cut points
        out, _ = fit(messages, count, context_length=context, answer_room=100,
                     policy=policy)
        ids_called = {c["id"] for m in out for c in m.get("tool_calls") or ()}
        ids_answered = {m["tool_call_id"] for m in out if m["role"] == "tool"}
        assert ids_called == ids_answered
        first_after_system = out[1]
        assert first_after_system["role"] == "user"


def test_a_last_message_too_long_for_any_policy_is_left_to_the_engine() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "x" * 900}]
    assert fit(messages, count, context_length=512, answer_room=64,
               policy=Policy.ROLLING_WINDOW) == (messages, Dropped())
