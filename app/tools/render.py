"""A conversation with tools, made ready for a chat template.

A template that renders tools (it takes `tools=` and writes them out) gets
`template_messages`: OpenAI's messages with each call's arguments as an object, as
Hugging Face templates expect. A template without tool support (the bundled SmolLM2's)
gets `fallback_messages`: plain role/content messages, the tools listed in a system
section that asks for calls in the HERMES format, earlier calls written in that format and
tool results as user messages in <tool_response> tags (any template takes those roles)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .formats import HERMES
from .spec import Tool

SECTION = """# Tools

You may call one or more functions to help with the user's request. The functions are \
listed in <tools></tools> tags:
<tools>
{tools}
</tools>

To call a function, reply with a JSON object holding its name and arguments inside \
<tool_call></tool_call> tags:
<tool_call>
{{"name": <function-name>, "arguments": <arguments-json-object>}}
</tool_call>"""


def tools_section(tools: Sequence[Tool]) -> str:
    """The system-prompt section that teaches a model without tool support the tools."""
    listed = "\n".join(json.dumps(t.openai(), ensure_ascii=False) for t in tools)
    return SECTION.format(tools=listed)


def call_text(name: str, arguments: str | Mapping[str, Any]) -> str:
    """One call written in the HERMES format."""
    args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return f"{HERMES.start}\n{body}\n{HERMES.end}"


def fallback_messages(messages: Sequence[Mapping[str, Any]],
                      tools: Sequence[Tool]) -> list[dict[str, str]]:
    """Plain {role, content} messages for any template. `tools` empty: none offered (the
    earlier calls and results are still written out)."""
    out: list[dict[str, str]] = []
    for m in messages:
        role, content = m["role"], m.get("content") or ""
        if role == "assistant" and m.get("tool_calls"):
            calls = [call_text(c["function"]["name"], c["function"]["arguments"])
                     for c in m["tool_calls"]]
            content = "\n".join(([content] if content else []) + calls)
        elif role == "tool":
            result = f"<tool_response>\n{content}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1]["content"].endswith(
                    "</tool_response>"):  # several results: one user turn
                out[-1]["content"] += "\n" + result
                continue
            role, content = "user", result
        out.append({"role": role, "content": content})
    if tools:
        section = tools_section(tools)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{section}"}
        else:
            out.insert(0, {"role": "system", "content": section})
    return out


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI's messages for a template that renders tools: each call's arguments as an
    object (templates write them with `tojson`), content never null."""
    out = []
    for m in messages:
        msg = dict(m)
        msg["content"] = m.get("content") or ""
        if m.get("tool_calls"):
            msg["tool_calls"] = [
                {"id": c.get("id"), "type": "function", "function": {
                    "name": c["function"]["name"],
                    "arguments": json.loads(c["function"]["arguments"])}}
                for c in m["tool_calls"]]
        out.append(msg)
    return out
