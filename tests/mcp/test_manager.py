"""McpManager against a real MCP server (the SDK's MCPServer over stdio, started here):
tools listed, calls answered, a tool's error, a timeout, a server that cannot start and a
bad entry each give a clear text; saved servers survive a settings round trip."""

from __future__ import annotations

import sys

import pytest

from app.mcp import McpConfigError, McpError, McpManager, McpServerConfig
from app.settings import Settings
from tests.mcp.conftest import weather


async def test_list_and_call_tools_over_stdio():
    manager = McpManager([weather()])
    try:
        tools = {t.name: t for t in await manager.list_tools("weather")}
        assert set(tools) == {"get_weather", "add", "slow", "fail"}
        schema = tools["get_weather"].input_schema
        assert schema["properties"]["city"]["enum"] == ["Oslo", "Lima", "Perth"]
        assert schema["required"] == ["city"]
        assert tools["get_weather"].description == "The weather in a city."
        assert tools["add"].openai_tool()["function"]["parameters"]["required"] == ["a", "b"]
        result = await manager.call_tool("weather", "get_weather", {"city": "Oslo"})
        assert (result.text, result.is_error) == ("Sunny in Oslo, 21 °C", False)
        assert (await manager.call_tool("weather", "add", {"a": 2, "b": 40})).text == "42"
        failed = await manager.call_tool("weather", "fail", {"reason": "no sun today"})
        assert failed.is_error and "no sun today" in failed.text
        with pytest.raises(McpError, match=r"weather: slow timed out after 0.5 s"):
            await manager.call_tool("weather", "slow", {"seconds": 10}, timeout_s=0.5)
        # the connection still serves after a timeout
        assert (await manager.call_tool("weather", "add", {"a": 1, "b": 1})).text == "2"
    finally:
        await manager.close()


async def test_a_server_that_cannot_start_says_so():
    manager = McpManager([McpServerConfig("ghost", command="/no/such/mcp-server --x"),
                          McpServerConfig("mute", command=f"{sys.executable} -c pass",
                                          timeout_s=10)])
    try:
        with pytest.raises(McpError, match="ghost: cannot start /no/such/mcp-server --x: "):
            await manager.list_tools("ghost")
        with pytest.raises(McpError, match="mute: "):
            await manager.list_tools("mute")
        with pytest.raises(McpError, match="no MCP server named 'nope'"):
            await manager.call_tool("nope", "x", {})
    finally:
        await manager.close()


async def test_an_unreachable_url_says_so():
    manager = McpManager([McpServerConfig("web", url="http://127.0.0.1:9/mcp", timeout_s=5)])
    try:
        with pytest.raises(McpError, match=r"web: cannot connect to http://127.0.0.1:9/mcp: "):
            await manager.list_tools("web")
    finally:
        await manager.close()


async def test_test_connects_lists_and_disconnects():
    tools = await McpManager().test(weather("probe"))
    assert "get_weather" in [t.name for t in tools]


@pytest.mark.parametrize(("entry", "message"), [
    ({"name": "", "command": "x"}, "needs a name"),
    ({"name": "a"}, "a: give either a command or a URL"),
    ({"name": "a", "command": "x", "url": "http://h"}, "give either a command or a URL"),
    ({"name": "a", "url": "ftp://h/mcp"}, "must start with http:// or https://"),
    ({"name": "a", "command": "say 'unclosed"}, "cannot read the command"),
    ({"name": "a", "command": "x", "timeout_s": -1}, "timeout must be"),
])
def test_bad_entries_are_refused(entry, message):
    with pytest.raises(McpConfigError, match=message):
        McpServerConfig.from_dict(entry)


def test_servers_are_saved_in_settings(tmp_path):
    s = Settings(tmp_path / "settings.json")
    s.set_mcp_servers([weather(), McpServerConfig("web", url="https://example.org/mcp")])
    again = Settings.load(tmp_path / "settings.json")
    assert again.mcp_servers == s.mcp_servers
    with pytest.raises(ValueError, match="same name"):
        s.set_mcp_servers([weather(), weather()])


async def test_list_and_call_over_streamable_http():
    import asyncio
    import socket
    import subprocess

    from bench.mlx_lm_server import free_port
    from tests.mcp.conftest import SERVER_SCRIPT

    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER_SCRIPT), "http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    manager = McpManager([McpServerConfig("web", url=f"http://127.0.0.1:{port}/mcp",
                                          timeout_s=20)])
    try:
        for _ in range(200):  # until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        assert "get_weather" in [t.name for t in await manager.list_tools("web")]
        result = await manager.call_tool("web", "get_weather", {"city": "Lima"})
        assert result.text == "Sunny in Lima, 21 °C" and not result.is_error
    finally:
        await manager.close()
        proc.terminate()
        proc.wait(timeout=10)
