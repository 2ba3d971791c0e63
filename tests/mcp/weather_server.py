"""A small real MCP server (the `mcp` SDK's MCPServer, formerly FastMCP) for the tests,
run over stdio (`python tests/mcp/weather_server.py`) or streamable HTTP
(`python tests/mcp/weather_server.py http PORT`: http://127.0.0.1:PORT/mcp)."""

from __future__ import annotations

import asyncio
import sys
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("weather")


@server.tool()
def get_weather(city: Literal["Oslo", "Lima", "Perth"]) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 °C"


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
async def slow(seconds: Literal[10]) -> str:
    """Wait, then answer (for timeouts)."""
    await asyncio.sleep(seconds)
    return "done"


@server.tool()
def fail(reason: Literal["no sun today"]) -> str:
    """Always fails with `reason`."""
    raise ToolError(reason)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
