"""A response in the Responses API's shape: its output items (reasoning, message with
output_text, function_call), status, usage and the request's settings echoed. Built from
the chat route's own whole reply (responses.full), so both say the same of a generation."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def reasoning_item(item_id: str, text: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": item_id, "summary": [],
            "content": [{"type": "reasoning_text", "text": text}], "status": "completed"}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, text: str | None, status: str = "completed") -> dict[str, Any]:
    return {"type": "message", "id": item_id, "role": "assistant", "status": status,
            "content": [] if text is None else [text_part(text)]}


def call_item(item_id: str, call_id: str, name: str, arguments: str,
              status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name,
            "arguments": arguments, "status": status}


def items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A chat reply's assistant message as output items, in the order they were made."""
    out: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        out.append(reasoning_item(new_id("rs"), message["reasoning_content"]))
    if message.get("content"):
        out.append(message_item(new_id("msg"), message["content"]))
    for call in message.get("tool_calls") or ():
        fn = call["function"]
        out.append(call_item(new_id("fc"), call["id"], fn["name"], fn["arguments"] or ""))
    return out


def usage(openai: Mapping[str, Any]) -> dict[str, Any]:
    """The chat usage in Responses' shape; `dropped_tokens` and `dropped_messages` (what
    the context overflow policy left out) only when it dropped something, as in chat."""
    return {"input_tokens": openai["prompt_tokens"],
            "input_tokens_details": dict(openai["prompt_tokens_details"]),
            "output_tokens": openai["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": openai["completion_tokens_details"]
                                      ["reasoning_tokens"]},
            "total_tokens": openai["total_tokens"]}


class Envelope:
    """The response object's fields that do not depend on the output: the request's
    settings echoed back, as OpenAI's responses carry them."""

    def __init__(self, body: Mapping[str, Any], model: str) -> None:
        self.id = new_id("resp")
        self.created_at = int(time.time())
        self.body = body
        self.model = model

    def response(self, status: str, output: list[dict[str, Any]],
                 usage: dict[str, Any] | None = None,
                 finish: str | None = None) -> dict[str, Any]:
        """The response object; `finish` (the chat reply's finish reason) "length" makes it
        incomplete for max_output_tokens, as OpenAI says it."""
        b = self.body
        if finish == "length":
            status = "incomplete"
        reasoning = b.get("reasoning") or {}
        return {
            "id": self.id, "object": "response", "created_at": self.created_at,
            "status": status, "model": self.model, "output": output,
            "incomplete_details": {"reason": "max_output_tokens"}
            if status == "incomplete" else None,
            "error": None, "instructions": b.get("instructions"),
            "max_output_tokens": b.get("max_output_tokens"),
            "temperature": b.get("temperature", 1.0), "top_p": b.get("top_p", 1.0),
            "tools": list(b.get("tools") or []), "tool_choice": b.get("tool_choice", "auto"),
            "parallel_tool_calls": b.get("parallel_tool_calls", True),
            "previous_response_id": b.get("previous_response_id"),
            "store": b.get("store", True),
            "text": b.get("text") or {"format": {"type": "text"}},
            "reasoning": {"effort": reasoning.get("effort"), "summary": None},
            "truncation": b.get("truncation") or "disabled",
            "metadata": b.get("metadata") or {},
            "user": b.get("user"), "usage": usage,
        }
