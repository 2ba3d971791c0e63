"""Issue #53 (4) through the official `openai` and `anthropic` SDKs on loopback: a 30-turn
chat far past the tiny model's 512-token context continues under truncate_middle and
rolling_window (the request field, LM Studio's name, or the server's default), each reply
saying in its usage what was dropped, while `stop` refuses as before."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.api_clients import anthropic_client
from tests.server.conftest import MODEL

CONTEXT = 512
MAX_TOKENS = 24
SYSTEM = {"role": "system", "content": "You answer briefly."}


def question(i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Turn {i}: tell me one more thing about rivers."}


async def chat_30_turns(client: openai.AsyncOpenAI, extra: dict[str, Any] | None
                        ) -> list[Any]:
    """30 turns, each reply appended as the next request's history; the usage of each."""
    messages: list[dict[str, Any]] = [SYSTEM]
    usages = []
    for i in range(30):
        messages.append(question(i))
        reply = await client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=MAX_TOKENS, temperature=0,
            extra_body=extra)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        usages.append(reply.usage)
    return usages


def dropped_of(usage: Any) -> tuple[int, int]:
    details = (usage.prompt_tokens_details.model_dump() if usage.prompt_tokens_details
               else {})
    return details.get("dropped_tokens", 0), details.get("dropped_messages", 0)


@pytest.mark.parametrize("extra", [{"context_overflow": "truncate_middle"},
                                   {"context_overflow": "rolling_window"},
                                   {"contextOverflowPolicy": "rollingWindow"}])
async def test_30_turns_continue_past_the_context(serve, extra) -> None:
    s = await serve(engine={"max_concurrent": 2})
    usages = await chat_30_turns(s.client, extra)
    assert len(usages) == 30
    for u in usages:  # every prompt left the reply its room
        assert u.prompt_tokens + MAX_TOKENS <= CONTEXT
    dropped = [dropped_of(u) for u in usages]
    assert dropped[0] == (0, 0)  # the first turns fit: nothing said
    assert all(tokens > 0 and messages >= 2 for tokens, messages in dropped[-10:])
    # the chat as sent would have been far past the context
    assert usages[-1].prompt_tokens + dropped[-1][0] > CONTEXT


async def test_the_servers_default_applies_when_the_request_names_none(serve) -> None:
    s = await serve(engine={"max_concurrent": 2}, context_overflow="rolling_window")
    usages = await chat_30_turns(s.client, None)
    assert dropped_of(usages[-1])[0] > 0


async def test_stop_refuses_as_before(serve) -> None:
    s = await serve(engine={"max_concurrent": 2})
    for extra in (None, {"context_overflow": "stop"}):
        with pytest.raises(openai.BadRequestError) as info:
            await chat_30_turns(s.client, extra)
        assert info.value.code == "invalid_request"
        assert "context" in info.value.message


async def test_an_unknown_policy_is_refused_naming_the_field(serve) -> None:
    s = await serve()
    with pytest.raises(openai.BadRequestError) as info:
        await s.client.chat.completions.create(
            model=MODEL, messages=[question(0)], max_tokens=2,
            extra_body={"context_overflow": "shift"})
    assert info.value.param == "context_overflow"
    assert "truncate_middle" in info.value.message


async def test_anthropic_messages_take_the_policy(serve) -> None:
    s = await serve(engine={"max_concurrent": 2})
    client = anthropic_client(s.url, api_key="unused", max_retries=0, timeout=60)
    try:
        turns: list[dict[str, Any]] = []
        for i in range(30):
            turns.append({"role": "user", "content": question(i)["content"]})
            reply = await client.messages.create(
                model=MODEL, system=SYSTEM["content"], messages=turns,
                max_tokens=MAX_TOKENS, extra_body={"context_overflow": "truncate_middle"})
            text = "".join(b.text for b in reply.content if b.type == "text") or "."
            turns.append({"role": "assistant", "content": text})
            assert reply.usage.input_tokens + (reply.usage.cache_read_input_tokens or 0) \
                + MAX_TOKENS <= CONTEXT
    finally:
        await client.close()


async def test_a_truncated_prompt_is_answered_as_that_prompt_sent_as_it_is(serve) -> None:
    """The prefix cache stays exact: the reply to a truncated chat (streamed, its usage in
    the last chunk) is token for token the reply to the kept messages sent under `stop`,
    which then reads its prompt from the cache."""
    from app.request.overflow import Policy, fit

    s = await serve(engine={"max_concurrent": 2})
    messages: list[dict[str, Any]] = [SYSTEM]
    for i in range(30):
        messages += [question(i), {"role": "assistant", "content": f"Answer {i}: water."}]
    messages.append(question(30))
    kept, dropped = fit(messages, lambda m: len(s.engine.prompt_tokens(m)),
                        context_length=CONTEXT, answer_room=MAX_TOKENS,
                        policy=Policy.TRUNCATE_MIDDLE)
    assert dropped and kept[:3] == messages[:3] and kept[-1] == messages[-1]

    stream = await s.client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=MAX_TOKENS, temperature=0, stream=True,
        stream_options={"include_usage": True},
        extra_body={"context_overflow": "truncate_middle"})
    text, usage = "", None
    async for chunk in stream:
        text += "".join(c.delta.content or "" for c in chunk.choices)
        usage = chunk.usage or usage
    assert dropped_of(usage) == (dropped.tokens, dropped.messages)

    whole = await s.client.chat.completions.create(
        model=MODEL, messages=kept, max_tokens=MAX_TOKENS, temperature=0)
    assert whole.choices[0].message.content == text
    assert whole.usage.prompt_tokens == usage.prompt_tokens
    assert whole.usage.prompt_tokens_details.cached_tokens > 0  # the truncated prompt's
    assert dropped_of(whole.usage) == (0, 0)


def test_serve_takes_the_default_policy(capsys) -> None:
    from app.server.serve import parse_args

    assert parse_args([]).context_overflow == "stop"
    assert parse_args(["--context-overflow", "rolling_window"]).context_overflow == \
        "rolling_window"
    with pytest.raises(SystemExit) as info:
        parse_args(["--context-overflow", "shift"])
    assert info.value.code == 2
    assert "--context-overflow" in capsys.readouterr().err
