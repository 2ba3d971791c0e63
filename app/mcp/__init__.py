"""MCP servers' tools for the chat tabs (the official `mcp` SDK), Qt-free."""

from .config import McpConfigError, McpServerConfig
from .manager import McpError, McpManager, ToolInfo, ToolResult

__all__ = ["McpConfigError", "McpError", "McpManager", "McpServerConfig", "ToolInfo",
           "ToolResult"]
