"""Issue #53: `/v1/responses` takes the context overflow policy per request, as
chat/completions and messages do (`context_overflow`, LM Studio's `contextOverflowPolicy`)
and by OpenAI's own `truncation` ("auto": truncate the middle; "disabled": refuse). A 30-turn
conversation continued by `previous_response_id` far past the tiny model's 512-token
context goes on, each response's usage saying what was dropped; through the `openai` SDK."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.server.conftest import MODEL

CONTEXT = 512
MAX_TOKENS = 24


def question(i: int) -> str:
    return f"Turn {i}: tell me one more thing about rivers."


def dropped_of(response: Any) -> tuple[int, int]:
    details = response.usage.input_tokens_details.model_dump()
    return details.get("dropped_tokens", 0), details.get("dropped_messages", 0)


async def thirty_turns(client: openai.AsyncOpenAI, **fields: Any) -> list[Any]:
    """30 turns, each continuing the last by previous_response_id; every response."""
    out: list[Any] = []
    for i in range(30):
        out.append(await client.responses.create(
            model=MODEL, input=question(i), instructions="You answer briefly.",
            max_output_tokens=MAX_TOKENS, temperature=0,
            previous_response_id=out[-1].id if out else None, **fields))
    return out


@pytest.mark.parametrize("fields", [{"extra_body": {"context_overflow": "rolling_window"}},
                                    {"extra_body": {"contextOverflowPolicy":
                                                    "truncateMiddle"}},
                                    {"truncation": "auto"}])
async def test_30_turns_continue_past_the_context(serve, fields) -> None:
    s = await serve(engine={"max_concurrent": 2})
    responses = await thirty_turns(s.client, **fields)
    for r in responses:  # every prompt left the reply its room
        assert r.usage.input_tokens + MAX_TOKENS <= CONTEXT
    dropped = [dropped_of(r) for r in responses]
    assert dropped[0] == (0, 0)  # the first turns fit: nothing said
    assert all(tokens > 0 and messages >= 2 for tokens, messages in dropped[-10:])
    assert responses[-1].usage.input_tokens + dropped[-1][0] > CONTEXT  # as sent: too long
    assert responses[-1].truncation == fields.get("truncation", "disabled")


async def test_disabled_truncation_refuses_over_the_servers_default(serve) -> None:
    """The server truncates by default here; a request saying `truncation: "disabled"` is
    refused at the context as OpenAI's is, and one saying nothing is truncated."""
    s = await serve(engine={"max_concurrent": 2}, context_overflow="rolling_window")
    responses = await thirty_turns(s.client)
    assert dropped_of(responses[-1])[0] > 0
    with pytest.raises(openai.BadRequestError) as info:
        await s.client.responses.create(model=MODEL, input="And?", truncation="disabled",
                                        previous_response_id=responses[-1].id,
                                        max_output_tokens=MAX_TOKENS)
    assert "context" in info.value.message


async def test_a_streamed_response_says_what_was_dropped(serve) -> None:
    s = await serve(engine={"max_concurrent": 2})
    turns: list[dict[str, Any]] = []
    for i in range(30):
        turns += [{"role": "user", "content": question(i)},
                  {"role": "assistant", "content": f"Answer {i}: water."}]
    turns.append({"role": "user", "content": question(30)})
    body = dict(model=MODEL, input=turns, max_output_tokens=MAX_TOKENS, temperature=0,
                extra_body={"context_overflow": "truncate_middle"})
    whole = await s.client.responses.create(**body)
    async with s.client.responses.stream(**body) as stream:
        async for event in stream:
            last = event
    streamed = last.response
    assert dropped_of(whole)[0] > 0 and dropped_of(streamed) == dropped_of(whole)
    assert streamed.output_text == whole.output_text
    assert streamed.usage.input_tokens == whole.usage.input_tokens


@pytest.mark.parametrize(("fields", "param"), [
    ({"extra_body": {"context_overflow": "shift"}}, "context_overflow"),
    ({"extra_body": {"truncation": "middle"}}, "truncation")])
async def test_a_bad_policy_is_refused_naming_the_field(serve, fields, param) -> None:
    s = await serve()
    with pytest.raises(openai.BadRequestError) as info:
        await s.client.responses.create(model=MODEL, input="Hi", max_output_tokens=2,
                                        **fields)
    assert info.value.param == param
