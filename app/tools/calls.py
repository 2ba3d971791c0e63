"""One tool call as a reply makes it: an id, the function's name, its arguments as JSON text."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # a JSON object as text (OpenAI's shape)

    @classmethod
    def of(cls, name: str, arguments: Any, id: str | None = None) -> ToolCall:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments,
                                                                        ensure_ascii=False)
        return cls(id or new_call_id(), name, text)

    def openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}
