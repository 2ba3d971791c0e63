"""One saved MCP server: a name and either a stdio command line or a streamable-HTTP URL."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

DEFAULT_TIMEOUT_S = 30.0


class McpConfigError(ValueError):
    """A server entry that cannot be used; the message says which field and why."""


@dataclass(frozen=True)
class McpServerConfig:
    """`command` is a command line (split like a shell, no shell runs it), `url` an http(s)
    URL of a streamable-HTTP endpoint; exactly one of them. `timeout_s` bounds each call."""

    name: str
    command: str = ""
    url: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise McpConfigError("an MCP server needs a name")
        if bool(self.command.strip()) == bool(self.url.strip()):
            raise McpConfigError(f"{self.name}: give either a command or a URL")
        if self.command.strip():
            try:
                if not shlex.split(self.command):
                    raise McpConfigError(f"{self.name}: the command is empty")
            except ValueError as exc:
                raise McpConfigError(f"{self.name}: cannot read the command: {exc}") from None
        if self.url.strip():
            parts = urlparse(self.url.strip())
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise McpConfigError(f"{self.name}: the URL must start with http:// or "
                                     "https:// and name a host")
        if not (0 < self.timeout_s <= 3600):
            raise McpConfigError(f"{self.name}: the timeout must be 0–3600 s")

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)

    @property
    def where(self) -> str:
        """The command or the URL, for messages."""
        return self.command.strip() or self.url.strip()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.command.strip():
            out["command"] = self.command.strip()
        else:
            out["url"] = self.url.strip()
        if self.timeout_s != DEFAULT_TIMEOUT_S:
            out["timeout_s"] = self.timeout_s
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> McpServerConfig:
        if not isinstance(data, Mapping):
            raise McpConfigError("an MCP server entry must be an object")
        timeout = data.get("timeout_s", DEFAULT_TIMEOUT_S)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool):
            raise McpConfigError("timeout_s must be a number")
        return cls(str(data.get("name") or ""), str(data.get("command") or ""),
                   str(data.get("url") or ""), float(timeout))
