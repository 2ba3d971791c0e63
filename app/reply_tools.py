"""A reply's tool calls as the conversation keeps them: taken out of a finished reply, and
each call's outcome as the model reads it in the next prompt. Qt-free."""

from __future__ import annotations

import uuid
from typing import Any

from engine.public import split_whole

from .bridge import Generation
from .tools import parse_reply


def reply_calls(gen: Generation, text: str) -> tuple[str, list[dict[str, Any]]] | None:
    """(the reply's text without its calls, its calls in OpenAI's shape), or None when it
    called no tool: local replies are parsed with the format their prompt asked for, a
    remote server's calls arrive parsed on the stream."""
    remote = getattr(gen.stream, "tool_calls", None)
    if remote:
        return text, [dict(c) for c in remote]
    harmony = harmony_calls(gen)
    if harmony:
        return text, harmony
    if gen.call_format is None or not text:
        return None
    parsed = parse_reply(text, gen.call_format, gen.tool_names)
    if not parsed.calls:
        return None
    return parsed.content or "", [c.openai() for c in parsed.calls]


def harmony_calls(gen: Generation) -> list[dict[str, Any]]:
    """A Harmony model's calls (gpt-oss: commentary to=functions.NAME), which its reply's
    split takes out of the answer (engine/reasoning/harmony.py), in OpenAI's shape."""
    shape = gen.shape
    if shape is None or not shape.style.harmony:
        return []
    _thinking, _answer, found = split_whole(gen.text, shape.style, shape.inside)
    return [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
             "function": {"name": p.name, "arguments": p.text}} for p in found]


def tool_result_text(outcome: dict[str, str] | None) -> str:
    """What the model reads for a call's outcome."""
    if outcome is None or outcome["status"] == "denied":
        why = (outcome or {}).get("text") or ""
        return f"The user denied this tool call. {why}".strip()
    if outcome["status"] == "failed":
        return f"Error: {outcome['text']}"
    return outcome["text"]
