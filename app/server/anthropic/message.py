"""A whole reply in Anthropic's shape: the content blocks (thinking, text, tool_use), the
stop reason, the stop sequence that ended it and the usage. Built from the OpenAI route's
own whole reply (responses.full), so both say the same thing of one generation."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

# A thinking block's `signature`: Anthropic signs its thinking so that it can tell a
# returned block was not changed; this server checks nothing (a returned block's thinking
# is handed to the template as it is), so it signs nothing
SIGNATURE = ""


def message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def stop_sequence(reply_text: str, stops: Sequence[str]) -> str | None:
    """The stop sequence that ended a reply whose tokens decode to `reply_text` (the stop
    string included; the engine cuts it from the text it sends): the earliest found, as
    the engine's own search finds it. None: no stop sequence is in it."""
    found = [(reply_text.find(s), i) for i, s in enumerate(stops) if s in reply_text]
    return stops[min(found)[1]] if found else None


def stop_reason(finish: str, matched: str | None) -> str:
    """Anthropic's stop_reason for the OpenAI route's finish reason (stop, length,
    tool_calls)."""
    if finish == "length":
        return "max_tokens"
    if finish == "tool_calls":
        return "tool_use"
    return "stop_sequence" if matched is not None else "end_turn"


def usage(openai: Mapping[str, Any]) -> dict[str, int]:
    """Anthropic's usage: `input_tokens` are the prompt tokens computed for this request,
    `cache_read_input_tokens` those reused from the prefix cache (together, the prompt)."""
    cached = openai["prompt_tokens_details"]["cached_tokens"]
    return {"input_tokens": openai["prompt_tokens"] - cached,
            "cache_read_input_tokens": cached,
            "output_tokens": openai["completion_tokens"]}


def content(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An OpenAI assistant message's parts as Anthropic content blocks, in the order they
    were generated."""
    blocks: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        blocks.append({"type": "thinking", "thinking": message["reasoning_content"],
                       "signature": SIGNATURE})
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        blocks.append({"type": "tool_use", "id": call["id"],
                       "name": call["function"]["name"],
                       "input": json.loads(call["function"]["arguments"] or "{}")})
    return blocks


def whole(openai: Mapping[str, Any], msg_id: str, model: str,
          matched: str | None) -> dict[str, Any]:
    """The Anthropic message for the OpenAI route's whole chat reply `openai` (one choice)."""
    choice = openai["choices"][0]
    return {"id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": content(choice["message"]),
            "stop_reason": stop_reason(choice["finish_reason"], matched),
            "stop_sequence": matched, "usage": usage(openai["usage"])}
