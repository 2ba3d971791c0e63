"""McpManager: connections to the saved MCP servers, their tools, and tool calls with a
timeout, on the app's asyncio loop (qasync's in the app: awaiting never blocks the UI).

Each server gets one connection, opened on first use and kept: a holder task enters the SDK's
`Client` and stays inside it until `close()` (anyio wants the same task to enter and leave
it); calls run from the caller's task on that client. A connection that broke is reopened by
the next call. Every failure is an McpError whose text says which server and what went wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from .config import McpServerConfig

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0  # the least a server gets to start and answer (its calls: timeout_s)


class McpError(Exception):
    """A server could not be reached, or a call failed or timed out (the text says why)."""


@dataclass(frozen=True)
class ToolInfo:
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    def openai_tool(self) -> dict[str, Any]:
        """The tool as an OpenAI `tools` entry (what a chat template renders)."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": self.input_schema or {"type": "object"}}}


@dataclass(frozen=True)
class ToolResult:
    text: str  # what goes back to the model (the result's text content, joined)
    is_error: bool = False  # the tool ran and reported an error


class _Link:
    """One open connection: `client` once `ready` is done; `close()` leaves it."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[Any] = loop.create_future()
        self._closing = asyncio.Event()
        self.task = loop.create_task(self._hold(), name=f"mcp-{config.name}")

    @property
    def alive(self) -> bool:
        return not self.task.done()

    async def _hold(self) -> None:
        from mcp import Client  # the SDK is large: loaded when a server is first used

        try:
            # its start (initialize) gets START_TIMEOUT_S at least; each call passes its own
            async with Client(_target(self.config), mode="legacy",
                              read_timeout_seconds=max(self.config.timeout_s,
                                                       START_TIMEOUT_S)) as client:
                if not self.ready.done():
                    self.ready.set_result(client)
                await self._closing.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
            if not self.ready.done():
                self.ready.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.info("MCP server %s closed: %s", self.config.name, describe(exc))

    async def close(self) -> None:
        self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout=5.0)
        except (TimeoutError, Exception):  # noqa: BLE001 - closing never fails
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task
        if self.ready.done() and not self.ready.cancelled():
            self.ready.exception()  # retrieved: no "never retrieved" warning


def _target(config: McpServerConfig) -> Any:
    if config.url.strip():
        return config.url.strip()
    from mcp import StdioServerParameters

    from engine.public import child_environment

    argv = config.argv
    # the app's environment, less the libraries and settings it preloaded for itself
    return StdioServerParameters(command=argv[0], args=argv[1:], env=child_environment())


def describe(exc: BaseException) -> str:
    """A short readable reason (the SDK's task groups wrap errors in ExceptionGroups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"no such program: {exc.filename or exc}"
    if isinstance(exc, PermissionError):
        return f"not allowed to run it: {exc}"
    name = type(exc).__name__
    text = str(exc).strip()
    if name == "ClosedResourceError" or (name == "MCPError" and "Connection closed" in text):
        return "the server closed the connection (did it start? is it an MCP server?)"
    return text or name


class McpManager:
    """The servers the app knows (`set_servers`), their tools and calls."""

    def __init__(self, servers: list[McpServerConfig] | None = None) -> None:
        self._servers: dict[str, McpServerConfig] = {}
        self._links: dict[str, _Link] = {}
        self.set_servers(servers or [])

    @property
    def servers(self) -> list[McpServerConfig]:
        return list(self._servers.values())

    def server(self, name: str) -> McpServerConfig | None:
        return self._servers.get(name)

    def set_servers(self, servers: list[McpServerConfig]) -> None:
        """Replace the list; connections of removed or changed servers close."""
        new = {s.name: s for s in servers}
        for name, link in list(self._links.items()):
            if new.get(name) != link.config:
                del self._links[name]
                _later(link.close())
        self._servers = new

    async def _client(self, name: str) -> Any:
        config = self._servers.get(name)
        if config is None:
            raise McpError(f"no MCP server named {name!r}")
        link = self._links.get(name)
        if link is None or not link.alive:
            link = self._links[name] = _Link(config)
        # Starting a server (a Python or npx program) can take seconds on a busy machine:
        # the call timeout bounds calls, not the start
        start_s = max(config.timeout_s, START_TIMEOUT_S)
        try:
            return await asyncio.wait_for(asyncio.shield(link.ready), start_s)
        except TimeoutError:
            await self._drop(name, link)
            raise McpError(f"{name}: no answer from {config.where} within "
                           f"{start_s:g} s") from None
        except Exception as exc:  # noqa: BLE001 - every failure becomes a readable McpError
            await self._drop(name, link)
            verb = "cannot connect to" if config.url.strip() else "cannot start"
            raise McpError(f"{name}: {verb} {config.where}: {describe(exc)}") from None

    async def _drop(self, name: str, link: _Link) -> None:
        if self._links.get(name) is link:
            del self._links[name]
        await link.close()

    async def list_tools(self, name: str) -> list[ToolInfo]:
        """The server's tools (connecting first if needed)."""
        client = await self._client(name)
        timeout = self._servers[name].timeout_s
        try:
            result = await asyncio.wait_for(client.list_tools(), timeout)
        except TimeoutError:
            raise McpError(f"{name}: listing its tools timed out after {timeout:g} s") from None
        except Exception as exc:  # noqa: BLE001
            raise McpError(f"{name}: listing its tools failed: {describe(exc)}") from None
        return [ToolInfo(name, t.name, t.description or "", dict(t.input_schema or {}))
                for t in result.tools]

    async def call_tool(self, name: str, tool: str, arguments: dict[str, Any],
                        timeout_s: float | None = None) -> ToolResult:
        """Call `tool` on server `name`. A tool that reports an error gives a ToolResult with
        `is_error`; a server that fails or does not answer in time raises McpError."""
        client = await self._client(name)
        timeout = timeout_s or self._servers[name].timeout_s
        try:
            result = await _abandonable(
                client.call_tool(tool, arguments, read_timeout_seconds=timeout), timeout + 1.0)
        except TimeoutError:
            raise McpError(f"{name}: {tool} timed out after {timeout:g} s") from None
        except Exception as exc:  # noqa: BLE001
            reason = describe(exc)
            if "timed out" in reason:  # the SDK's own read timeout
                raise McpError(f"{name}: {tool} timed out after {timeout:g} s") from None
            raise McpError(f"{name}: {tool} failed: {reason}") from None
        return ToolResult(_text_of(result), bool(result.is_error))

    async def test(self, config: McpServerConfig) -> list[ToolInfo]:
        """Connect to a server that may not be saved yet, list its tools, disconnect."""
        probe = McpManager([config])
        try:
            return await probe.list_tools(config.name)
        finally:
            await probe.close()

    async def close(self) -> None:
        """Close every connection (stdio servers' processes end)."""
        links, self._links = list(self._links.values()), {}
        await asyncio.gather(*(link.close() for link in links))


async def _abandonable(coro: Any, timeout: float) -> Any:
    """`await coro` within `timeout` (TimeoutError), in its own task: cancelling the caller
    (Stop) returns at once, even while the SDK's request still winds down."""
    inner = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({inner}, timeout=timeout)
    except asyncio.CancelledError:
        inner.cancel()
        inner.add_done_callback(_retrieve)
        raise
    if not done:
        inner.cancel()
        inner.add_done_callback(_retrieve)
        raise TimeoutError
    return inner.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # an abandoned call's error: not "never retrieved"


def _text_of(result: Any) -> str:
    parts = []
    for item in result.content or []:
        text = getattr(item, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(item, 'type', 'data')}]")
    if not parts and result.structured_content is not None:
        import json

        return json.dumps(result.structured_content)
    return "\n".join(parts)


def _later(coro: Any) -> None:
    """Run a closing coroutine in the background (from sync code), if a loop runs."""
    try:
        asyncio.get_running_loop().create_task(coro)
    except RuntimeError:
        coro.close()
