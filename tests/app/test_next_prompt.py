"""Conversation.next_prompt: what the next Send would submit (the token count counts it)."""

from __future__ import annotations

from app.conversation import ChatMessage, Conversation


def _chat() -> Conversation:
    msgs = [ChatMessage("user", "one"), ChatMessage("assistant", "reply one", token_ids=[5, 6]),
            ChatMessage("user", "two"), ChatMessage("assistant", "reply two")]
    return Conversation(None, system_prompt="Be brief.", messages=msgs)  # type: ignore[arg-type]


def test_a_new_message_follows_the_path_shown() -> None:
    conv = _chat()
    assert conv.next_prompt("three") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "reply one", "token_ids": [5, 6]},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "reply two"},
        {"role": "user", "content": "three"},
    ]


def test_an_edit_replaces_the_message_and_drops_what_followed() -> None:
    conv = _chat()
    assert conv.next_prompt("two, edited", editing=2) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "reply one", "token_ids": [5, 6]},
        {"role": "user", "content": "two, edited"},
    ]
    assert conv.next_prompt("first, edited", editing=0) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first, edited"},
    ]
