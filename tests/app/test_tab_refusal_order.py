"""A tab's refusals come in the order users have always seen: who answers is checked
before the request itself ("no model is ready", an unknown connection), then the request
(a bad output format, a tool that cannot be offered), then what the engine says. The
Conversation asks the bridge's route first and makes its ChatRequest after
(app/request/tab.py)."""

from __future__ import annotations

from typing import Any

from app.bridge import EngineBridge
from app.conversation import Conversation
from app.remote import Connection
from app.request import Refusal, RefusalCode
from app.request.tab import tab_request

from .history_sync_helpers import start_bridge, wait_until

BAD_FORMAT = {"response_format": {"type": "yaml_please"}}
BAD_TOOL = [{"type": "function", "function": {"name": "x", "parameters": {"type": 3}}}]


def refusals(conv: Conversation) -> list[Refusal]:
    seen: list[Refusal] = []
    conv.notice.connect(lambda note: seen.append(note) if isinstance(note, Refusal) else None)
    return seen


async def test_no_model_is_said_before_a_bad_format_then_the_format():
    conv = Conversation(EngineBridge(), params=BAD_FORMAT)
    seen = refusals(conv)
    assert not conv.send("hi")
    assert [r.code for r in seen] == [RefusalCode.MODEL_NOT_READY]
    assert "No model is loaded yet" in seen[0].message

    bridge = await start_bridge()  # a model serves: now the format is what is wrong
    try:
        conv = Conversation(bridge, params=BAD_FORMAT)
        seen = refusals(conv)
        assert not conv.send("hi")
        assert [r.code for r in seen] == [RefusalCode.INVALID_VALUE]
        assert seen[0].param == "response_format" and "yaml_please" in seen[0].message
        assert bridge.active == [] and [m.role for m in conv.messages] == ["user"]

        conv.update_settings("", {"max_tokens": 3})  # a good format: the reply starts
        assert conv.regenerate() and len(bridge.active) == 1
        await wait_until(lambda: not conv.is_busy)
    finally:
        await bridge.shutdown(timeout=2.0)


async def test_no_model_is_said_before_a_tool_that_cannot_be_offered():
    def tab(bridge: EngineBridge) -> tuple[Conversation, list[Refusal]]:
        conv = Conversation(bridge, params={"mcp_servers": ["files"]})
        conv.tool_turns.offered = BAD_TOOL
        return conv, refusals(conv)

    conv, seen = tab(EngineBridge())
    assert not conv.send("hi")
    assert [r.code for r in seen] == [RefusalCode.MODEL_NOT_READY]
    bridge = await start_bridge()
    try:
        conv, seen = tab(bridge)
        assert not conv.send("hi")
        assert [r.code for r in seen] == [RefusalCode.INVALID_VALUE]
        assert "a tool cannot be offered" in seen[0].message
    finally:
        await bridge.shutdown(timeout=2.0)


async def test_an_unknown_connection_is_said_before_a_bad_format():
    bridge = EngineBridge()
    known = Connection("http://127.0.0.1:9", name="lab", model="m")
    bridge.remotes.find = lambda name: known if name == "lab" else None
    conv = Conversation(bridge, params=BAD_FORMAT, backend="gone")
    seen = refusals(conv)
    assert not conv.send("hi")
    assert [r.code for r in seen] == [RefusalCode.MODEL_NOT_FOUND]
    conv.set_backend("lab")  # a server is sent the format as given, but checked all the same
    assert not conv.regenerate()
    assert [r.code for r in seen[1:]] == [RefusalCode.INVALID_VALUE]
    await bridge.remotes.close()


async def test_a_tabs_reply_is_the_reply_to_the_request_it_makes():
    bridge = await start_bridge()
    try:
        params: dict[str, Any] = {"max_tokens": 6, "temperature": 0.0}
        conv = Conversation(bridge, system_prompt="Be brief.", params=params)
        assert conv.send("hi")
        await wait_until(lambda: not conv.is_busy)
        user, reply = conv.messages
        direct = bridge.submit(tab_request(conv.prompt_messages(user), params),
                               bridge.route(None))
        await wait_until(lambda: direct.is_finished)
        assert reply.token_ids == direct.tokens and len(direct.tokens) == 6
    finally:
        await bridge.shutdown(timeout=2.0)
