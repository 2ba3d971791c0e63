"""A tab's MCP tools: lists the enabled servers' tools before a send, and runs the calls a
reply makes once the user allows them (or the tool is always allowed), handing each outcome
to the conversation (which feeds the results back to the model). Qt-free; calls run as tasks
on the app's asyncio loop, cancelled by Stop."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from .conversation import Conversation
from .mcp import McpError, McpManager
from .message_tree import ChatMessage


class ToolRunner:
    """`always`: tool names this tab runs without asking (the user's "Always allow")."""

    def __init__(self, conversation: Conversation, manager: McpManager) -> None:
        self.conversation = conversation
        self.manager = manager
        self.always: set[str] = set()
        # the name offered to the model -> (the server, the tool's own name there)
        self.server_of: dict[str, tuple[str, str]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        conversation.tool_turns.calls_found.connect(self._found)
        conversation.tool_turns.stopped.connect(self.cancel)

    async def prepare(self, servers: list[str]) -> list[dict[str, Any]]:
        """The tools of `servers` in OpenAI's shape; McpError names a server that cannot be
        reached. A name two servers offer is offered by the second as `<server>__<name>`
        (both stay usable; the model tells them apart by name)."""
        tools: list[dict[str, Any]] = []
        self.server_of = {}
        for server in servers:
            for tool in await self.manager.list_tools(server):
                offered = tool.name if tool.name not in self.server_of \
                    else offered_name(server, tool.name)
                if offered in self.server_of:
                    continue  # the same server listed twice
                self.server_of[offered] = (server, tool.name)
                entry = tool.openai_tool()
                entry["function"]["name"] = offered
                tools.append(entry)
        self.conversation.tool_turns.offered = tools
        return tools

    def decide(self, msg: ChatMessage, call_id: str, allow: bool,
               always: bool = False) -> None:
        """The user's answer for one call."""
        call = next((c for c in msg.tool_calls or [] if c["id"] == call_id), None)
        if call is None or msg.tool_results.get(call_id, {}).get("status") != "pending":
            return
        if not allow:
            self.conversation.tool_turns.set_result(msg, call_id, "denied")
            return
        if always:
            self.always.add(call["function"]["name"])
        self._run(msg, call)

    def cancel(self) -> None:
        for task in list(self.tasks):
            task.cancel()

    # -- internals -------------------------------------------------------------------------
    def _found(self, msg: ChatMessage) -> None:
        for call in list(msg.tool_calls or []):
            if call["function"]["name"] in self.always:
                self._run(msg, call)

    def _run(self, msg: ChatMessage, call: dict[str, Any]) -> None:
        self.conversation.tool_turns.set_result(msg, call["id"], "running")
        task = asyncio.get_event_loop().create_task(self._call(msg, call))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _call(self, msg: ChatMessage, call: dict[str, Any]) -> None:
        name = call["function"]["name"]
        server, tool = self.server_of.get(name, (None, name))
        try:
            if server is None:
                raise McpError(f"no enabled MCP server offers a tool named {name!r}")
            try:
                arguments = json.loads(call["function"]["arguments"] or "{}")
            except json.JSONDecodeError as exc:
                raise McpError(f"the arguments are not JSON: {exc}") from None
            if not isinstance(arguments, dict):
                raise McpError("the arguments are not a JSON object")
            result = await self.manager.call_tool(server, tool, arguments)
        except McpError as exc:
            self.conversation.tool_turns.set_result(msg, call["id"], "failed", str(exc))
            return
        self.conversation.tool_turns.set_result(msg, call["id"], "failed" if result.is_error
                                                else "done", result.text)


def offered_name(server: str, tool: str) -> str:
    """`<server>__<tool>` as a function name the OpenAI API takes ([a-zA-Z0-9_-], at most
    64 characters)."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", f"{server}__{tool}")[:64]
