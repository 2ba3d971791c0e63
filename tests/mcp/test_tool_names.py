"""Two MCP servers offering a tool of the same name: both stay usable. The second is
offered to the model as `<server>__<name>`, and a call to it reaches that server (real
stdio servers; ToolRunner is Qt-free)."""

from __future__ import annotations

import asyncio

from app.conversation import Conversation
from app.mcp import McpManager
from app.message_tree import ChatMessage
from app.tool_runner import ToolRunner, offered_name
from tests.mcp.conftest import weather


def pending_reply(conv: Conversation, *names: str) -> ChatMessage:
    """A reply waiting on calls of `names` (as the conversation holds one)."""
    calls = [{"id": f"call-{i}", "type": "function",
              "function": {"name": name, "arguments": '{"city": "Lima"}'}}
             for i, name in enumerate(names)]
    msg = ChatMessage("assistant", "", tool_calls=calls,
                      tool_results={c["id"]: {"status": "pending", "text": ""} for c in calls})
    conv.tool_wait[msg.id] = msg
    return msg


async def test_a_name_two_servers_offer_is_offered_twice_and_each_call_reaches_its_server():
    manager = McpManager([weather("weather"), weather("backup weather")])
    conv = Conversation(bridge=None)  # no reply is started: one call stays pending
    runner = ToolRunner(conv, manager)
    try:
        tools = await runner.prepare(["weather", "backup weather"])
        names = [t["function"]["name"] for t in tools]
        second = offered_name("backup weather", "get_weather")
        assert second == "backup_weather__get_weather"
        assert names.count("get_weather") == 1 and second in names
        assert len(names) == 8  # four tools from each server
        assert runner.server_of[second] == ("backup weather", "get_weather")
        msg = pending_reply(conv, second, "get_weather")
        runner.decide(msg, "call-0", allow=True)
        while msg.tool_results["call-0"]["status"] in ("pending", "running"):
            await asyncio.sleep(0.01)
        assert msg.tool_results["call-0"] == {"status": "done", "text": "Sunny in Lima, 21 °C"}
    finally:
        await manager.close()
