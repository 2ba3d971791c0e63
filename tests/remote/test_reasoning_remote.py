"""Issue #49: a remote server's reasoning reaches a remote tab. The connection's stream
(app/remote/stream.py) keeps the server's `reasoning_content` (or vLLM's `reasoning`)
deltas apart from the text, its frames say when only thinking arrived, and the tab's
message takes the thinking from it, with the server's own count of its tokens. The server
is this project's API server on loopback over the tiny thinking model
(tests/reasoning_model.py), its thinking steered by `thinking_token_budget`."""

from __future__ import annotations

import asyncio

import pytest

from app.bridge import Generation
from app.message_tree import ChatMessage
from app.reasoning.reply import take_text
from app.remote import Connection, RemoteClient
from tests.engine.conftest import skip_without_native
from tests.reasoning_model import QWEN3, thinking_tiny
from tests.server.conftest import serving

BUDGET = 40


@pytest.fixture(scope="module")
def qwen():
    skip_without_native()
    return thinking_tiny(seed=7, template=QWEN3)


async def test_a_remote_reply_keeps_its_thinking_apart(qwen) -> None:
    from engine import Engine, EngineConfig

    eng = Engine(qwen.model, qwen.tokenizer, eos_token_ids=sorted(qwen.eos_token_ids),
                 context_length=qwen.context_length, config=EngineConfig())
    question = [{"role": "user", "content": "What is 2+2?"}]
    async with serving(eng) as s:
        direct = await s.client.chat.completions.create(
            model="tiny", messages=question, max_tokens=BUDGET + 20, temperature=0,
            extra_body={"thinking_token_budget": BUDGET})
        client = RemoteClient(Connection(s.url, model="tiny"))
        try:
            stream = client.submit(question, params={"max_tokens": BUDGET + 20,
                                                     "temperature": 0.0},
                                   extra_body={"thinking_token_budget": BUDGET})
            gen = Generation(stream, "remote-test", backend="loopback")
            deltas: list[str] = []
            gen.delta.connect(deltas.append)
            events: list = []
            ended = asyncio.get_running_loop().create_future()

            def heard(event) -> None:  # as the frame pump hears it, a flush an event
                events.append(event)
                gen.ended = event.finish_reason is not None
                gen.flush()
                if gen.ended and not ended.done():
                    ended.set_result(None)

            stream.listen(heard)  # listened to, not iterated (EventStream.listen)
            await asyncio.wait_for(ended, timeout=60)
            text = stream.text
        finally:
            await client.close()
    expected = direct.choices[0].message
    assert stream.reasoning == expected.model_extra["reasoning_content"] != ""
    assert text == expected.content and "<think>" not in text
    # thinking-only chunks are frames of their own: the views hear of them
    assert "" in deltas and any(e.text == "" and e.token is not None for e in events)
    msg = ChatMessage("assistant", "", streaming=True)
    take_text(msg, gen, final=True)
    assert (msg.reasoning, msg.content) == (stream.reasoning, text)
    assert msg.reasoning_tokens == BUDGET + 2  # the server's count (its usage chunk)
