"""The test MCP server's command line (a real stdio subprocess, tests/mcp/weather_server.py)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from app.mcp import McpServerConfig

ROOT = Path(__file__).resolve().parents[2]
SERVER_SCRIPT = ROOT / "tests" / "mcp" / "weather_server.py"
COMMAND = shlex.join([sys.executable, str(SERVER_SCRIPT)])


def weather(name: str = "weather", timeout_s: float = 20.0) -> McpServerConfig:
    return McpServerConfig(name, command=COMMAND, timeout_s=timeout_s)
