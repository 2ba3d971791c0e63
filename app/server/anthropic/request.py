"""An Anthropic Messages body -> a ChatRequest, refusing a bad field with a 400 that names it
in Anthropic's terms.

The body is checked here (its blocks, tools, tool_choice, thinking), then written as the
OpenAI chat body it means and read by schemas.parse_chat, so the sampling fields, the tool
road and the grammars are the OpenAI routes' own: `system` becomes the first message, a
user's `tool_result` blocks `tool` messages, an assistant's `tool_use` blocks `tool_calls`
and its `thinking` blocks `reasoning_content`; `stop_sequences` is `stop`; `thinking` sets
the reasoning controls (app/request/reasoning.py maps them onto the model's family)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...images import ImageRefused, image_from_url
from ...images.parts import with_images
from ...images.refusal import TEXT_ONLY
from ...request import ChatRequest, Refusal
from .. import schemas
from ..errors import invalid

ROLES = ("user", "assistant")
USER_BLOCKS = ("text", "tool_result")
ASSISTANT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")
# blocks of media: a 400 naming them, but for a user's image block to a model that sees
# images (#52: read as the chat route's image_url parts are); documents are not read here
MEDIA_BLOCKS = ("image", "document")
TOOL_CHOICES = ("auto", "any", "tool", "none")
# between_tools (the 2026 SDK's: thinking between tool calls) is taken as adaptive: a
# reasoning model here thinks at the start of each reply, tool results included
THINKING = ("enabled", "disabled", "adaptive", "between_tools")
# output_config.effort in the reasoning effort's words (this server's highest is high)
EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
TEXT_JOIN = "\n"  # between a message's text blocks (and the system's)


def parse_messages(body: Mapping[str, Any], context_length: int, *,
                   sees_images: bool = False) -> ChatRequest:
    """`POST /v1/messages`' body as a ChatRequest (`max_tokens` is required, as Anthropic
    requires it); a user's image blocks are taken when the model `sees_images`."""
    metadata = body.get("metadata")  # Anthropic's user id for abuse reports: not used here
    if metadata is not None and not isinstance(metadata, Mapping):
        raise invalid("metadata", "'metadata' must be an object")
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise invalid("max_tokens", "'max_tokens' is required: the most tokens to generate")
    return _parsed(body, {
        "max_tokens": max_tokens, "temperature": body.get("temperature"),
        "top_p": body.get("top_p"), "top_k": body.get("top_k"),
        "stop": _stop_sequences(body.get("stop_sequences")), "stream": body.get("stream")},
        context_length, sees_images)


def parse_count(body: Mapping[str, Any], *, sees_images: bool = False) -> ChatRequest:
    """`POST /v1/messages/count_tokens`' body: the prompt's fields only."""
    return _parsed(body, {}, 1, sees_images)


def has_image_blocks(body: Any) -> bool:
    """Whether a body's messages carry image blocks (read off the loop: handler.py)."""
    messages = body.get("messages") if isinstance(body, Mapping) else None
    return isinstance(messages, list) and any(
        isinstance(m, Mapping) and isinstance(m.get("content"), list)
        and any(isinstance(b, Mapping) and b.get("type") == "image" for b in m["content"])
        for m in messages)


def _parsed(body: Mapping[str, Any], sampling: dict[str, Any],
            default_max_tokens: int, sees_images: bool = False) -> ChatRequest:
    tools = _tools(body.get("tools"))
    choice, parallel = _tool_choice(body.get("tool_choice"), tools)
    effort, response_format = _output_config(body.get("output_config"))
    openai = {"model": schemas.model_name(body),
              "messages": _system(body.get("system")) + _messages(body.get("messages"),
                                                                  sees_images),
              "tools": tools or None, "tool_choice": choice,
              "parallel_tool_calls": parallel, "response_format": response_format,
              # the context overflow policy, by the OpenAI route's names (schemas.py)
              "context_overflow": body.get("context_overflow"),
              "contextOverflowPolicy": body.get("contextOverflowPolicy")} | sampling
    controls = replace(_thinking(body.get("thinking")), effort=effort)
    try:
        parsed = schemas.parse_chat(openai, default_max_tokens)
    except Refusal as refusal:
        raise _in_anthropic_terms(refusal) from None
    return replace(parsed, reasoning=controls)


def _output_config(value: Any) -> tuple[str | None, dict[str, Any] | None]:
    """(the reasoning effort, OpenAI's response_format) of `output_config`: `effort` (low,
    medium, high; xhigh and max are high) and `format` ({type: json_schema, schema}: the
    reply's text is one JSON value of that schema, compact, as a strict json_schema)."""
    if value is None:
        return None, None
    if not isinstance(value, Mapping):
        raise invalid("output_config", "'output_config' must be an object")
    effort = value.get("effort")
    if effort is not None and (not isinstance(effort, str) or effort not in EFFORTS):
        raise invalid("output_config", "'output_config.effort' must be one of "
                                       f"{', '.join(EFFORTS)}")
    fmt = value.get("format")
    if fmt is None:
        return EFFORTS.get(effort or ""), None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema" \
            or not isinstance(fmt.get("schema"), Mapping):
        raise invalid("output_config", "'output_config.format' must be {\"type\": "
                                       "\"json_schema\", \"schema\": {...}}")
    return EFFORTS.get(effort or ""), {"type": "json_schema", "json_schema": {
        "name": "output", "schema": fmt["schema"], "strict": True}}


# -- the conversation -----------------------------------------------------------------------
def _system(value: Any) -> list[dict[str, Any]]:
    """`system`: a string or a list of text blocks (cache_control and the like ignored)."""
    if value is None:
        return []
    text = value if isinstance(value, str) else _texts(value, "system")
    return [{"role": "system", "content": text}]


def _texts(value: Any, where: str) -> str:
    """A list of text blocks' text, joined."""
    if not isinstance(value, list):
        raise invalid(where, f"'{where}' must be a string or a list of text blocks")
    out = []
    for j, block in enumerate(value):
        out.append(_text_block(block, f"{where}[{j}]"))
    return TEXT_JOIN.join(out)


def _text_block(block: Any, where: str) -> str:
    kind = _block_type(block, where)
    if kind in MEDIA_BLOCKS:
        raise _media(kind, where)
    if kind != "text" or not isinstance(block.get("text"), str):
        raise invalid(where, f"'{where}' must be a text block {{\"type\": \"text\", "
                             "\"text\": ...}")
    return block["text"]


def _block_type(block: Any, where: str) -> Any:
    if not isinstance(block, Mapping):
        raise invalid(where, f"'{where}' must be a content block (an object with 'type')")
    return block.get("type")


def _media(kind: str, where: str) -> Refusal:
    if kind == "image":  # read in a user message only (_user), for a model that sees them
        return invalid(where, f"'{where}' is an image block: images are read in a user "
                              "message's content only")
    return invalid(where, f"'{where}' is a {kind} block: this server reads text only "
                          f"({kind}s are not supported yet)")


def _messages(value: Any, sees_images: bool = False) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise invalid("messages", "'messages' must be a non-empty list of messages")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(m, Mapping):
            raise invalid(where, f"'{where}' must be an object with 'role' and 'content'")
        role = m.get("role")
        if role not in ROLES:
            raise invalid(f"{where}.role", f"'{where}.role' must be one of "
                                           f"{', '.join(ROLES)} (the system prompt goes "
                                           "in 'system')")
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        elif not isinstance(content, list) or (role == "user" and not content):
            raise invalid(f"{where}.content", f"'{where}.content' must be a string or a "
                                              "list of content blocks")
        out += _user(content, f"{where}.content", sees_images) if role == "user" \
            else _assistant(content, f"{where}.content")
    if value[-1].get("role") == "assistant":
        # Anthropic continues a last assistant message (a prefill); the chat templates here
        # close every assistant turn, so the reply would not continue it
        raise invalid(f"messages[{len(value) - 1}]", "the last message must be the user's: "
                      "continuing an assistant message (a prefill) is not supported")
    return out


def _user(blocks: list[Any], where: str, sees_images: bool = False) -> list[dict[str, Any]]:
    """A user turn: its tool results as `tool` messages, its text (and its images, after
    the text, as image_url parts) as a user message, in the blocks' order."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    images: list[Any] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = _block_type(block, at)
        if kind == "image" and sees_images:
            images.append(_image(block, at))
        elif kind == "image":
            raise invalid(at, f"'{at}' is an image block, and this model {TEXT_ONLY}: send "
                              "text only, or serve a vision model")
        elif kind == "tool_result":
            if texts or images:
                out.append({"role": "user", "content": with_images(TEXT_JOIN.join(texts),
                                                                   images)})
                texts, images = [], []
            out.append(_tool_result(block, at))
        elif kind in USER_BLOCKS or kind in MEDIA_BLOCKS:
            texts.append(_text_block(block, at))
        else:
            raise invalid(f"{at}.type", f"'{at}.type' must be one of "
                                        f"{', '.join(USER_BLOCKS)} in a user message")
    if texts or images or not out:
        out.append({"role": "user", "content": with_images(TEXT_JOIN.join(texts), images)})
    return out


def _image(block: Mapping[str, Any], where: str) -> Any:
    """An image block's image (`source`: base64 data and its media type; a URL is refused:
    the server runs offline and fetches nothing)."""
    source = block.get("source")
    kind = source.get("type") if isinstance(source, Mapping) else None
    if kind == "url":
        raise invalid(f"{where}.source", f"'{where}.source': image URLs are not fetched (the "
                                         "server runs offline); send the image as base64")
    data, media = (source or {}).get("data"), (source or {}).get("media_type")
    if kind != "base64" or not isinstance(data, str) or not isinstance(media, str):
        raise invalid(f"{where}.source", f"'{where}.source' must be {{\"type\": \"base64\", "
                                         "\"media_type\", \"data\"}")
    try:
        return image_from_url(f"data:{media};base64,{data}")
    except ImageRefused as refused:
        raise invalid(f"{where}.source.data", f"'{where}.source.data' cannot be used: "
                                              f"{refused.reason}") from None


def _tool_result(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{where}.tool_use_id", f"'{where}.tool_use_id' must be the id of the "
                                              "tool_use this answers")
    content = block.get("content")
    text = "" if content is None else content if isinstance(content, str) \
        else _texts(content, f"{where}.content")
    is_error = block.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        raise invalid(f"{where}.is_error", f"'{where}.is_error' must be true or false")
    if is_error:  # the model reads that the call failed
        text = f"Error: {text}"
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _assistant(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    """An assistant turn: text, tool_use blocks as tool_calls, thinking as
    reasoning_content (the template keeps or drops it); redacted thinking is dropped."""
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}[{j}]"
        kind = _block_type(block, at)
        if kind == "text":
            texts.append(_text_block(block, at))
        elif kind == "tool_use":
            calls.append(_tool_use(block, at))
        elif kind == "thinking":
            if not isinstance(block.get("thinking"), str):
                raise invalid(f"{at}.thinking", f"'{at}.thinking' must be a string")
            thoughts.append(block["thinking"])
        elif kind != "redacted_thinking":
            raise invalid(f"{at}.type", f"'{at}.type' must be one of "
                                        f"{', '.join(ASSISTANT_BLOCKS)} in an assistant "
                                        "message")
    message: dict[str, Any] = {"role": "assistant", "content": TEXT_JOIN.join(texts)}
    if calls:
        message["tool_calls"] = calls
    if thoughts:
        message["reasoning_content"] = TEXT_JOIN.join(thoughts)
    return [message]


def _tool_use(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    call_id, name, args = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise invalid(where, f"'{where}' must be {{\"type\": \"tool_use\", \"id\", \"name\", "
                             "\"input\"}")
    if not isinstance(args, Mapping):
        raise invalid(f"{where}.input", f"'{where}.input' must be an object")
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


# -- tools ----------------------------------------------------------------------------------
def _tools(value: Any) -> list[dict[str, Any]]:
    """Anthropic's client tools as OpenAI function tools (app/tools checks names and
    schemas); server tools (web search, code execution: a `type` other than custom) are
    refused, as this server runs none."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("tools", "'tools' must be a list of tools")
    out = []
    for i, tool in enumerate(value):
        at = f"tools[{i}]"
        if not isinstance(tool, Mapping):
            raise invalid(at, f"'{at}' must be a tool {{\"name\", \"input_schema\"}}")
        if tool.get("type") not in (None, "custom"):
            raise invalid(f"{at}.type", f"'{at}.type' must be 'custom' or absent: this "
                                        "server runs no server tools")
        if not isinstance(tool.get("input_schema"), Mapping):
            raise invalid(f"{at}.input_schema", f"'{at}.input_schema' must be a JSON schema "
                                                "of an object")
        out.append({"type": "function", "function": {
            "name": tool.get("name"), "description": tool.get("description"),
            "parameters": tool["input_schema"]}})
    return out


def _tool_choice(value: Any, tools: list[dict[str, Any]]) -> tuple[Any, bool | None]:
    """(OpenAI's tool_choice, parallel_tool_calls) for Anthropic's {type: auto | any |
    tool (with name) | none, disable_parallel_tool_use}."""
    if value is None:
        return None, None
    kind = value.get("type") if isinstance(value, Mapping) else None
    if kind not in TOOL_CHOICES:
        raise invalid("tool_choice", "'tool_choice.type' must be one of "
                                     f"{', '.join(TOOL_CHOICES)}")
    disable = value.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise invalid("tool_choice", "'tool_choice.disable_parallel_tool_use' must be true "
                                     "or false")
    if kind != "none" and not tools:
        raise invalid("tool_choice", f"'tool_choice' of type '{kind}' needs 'tools'")
    parallel = None if disable is None else not disable
    if kind == "tool":
        name = value.get("name")
        if name not in [t["function"]["name"] for t in tools]:
            raise invalid("tool_choice", "'tool_choice.name' must be the name of one of "
                                         "'tools'")
        return {"type": "function", "function": {"name": name}}, parallel
    return {"auto": "auto", "any": "required", "none": "none"}[kind], parallel


def _thinking(value: Any) -> Any:
    """The reasoning controls of `thinking`: enabled (with `budget_tokens`, the most
    thinking tokens), adaptive or between_tools (on, the model decides how long),
    disabled; absent: the model's own default."""
    from engine.public import Controls

    if value is None:
        return Controls()
    kind = value.get("type") if isinstance(value, Mapping) else None
    if kind not in THINKING:
        raise invalid("thinking", f"'thinking.type' must be one of {', '.join(THINKING)}")
    if kind == "disabled":
        return Controls(thinking=False)
    budget = value.get("budget_tokens")
    if kind == "enabled" and not (_whole(budget) and budget >= 1):
        raise invalid("thinking", "'thinking.budget_tokens' must be a whole number >= 1")
    return Controls(thinking=True, budget=int(budget) if kind == "enabled" else None)


def _whole(value: Any) -> bool:
    """An integer as JSON Schema counts them: 3 and 3.0, not true, 3.5 or infinity."""
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


def _stop_sequences(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise invalid("stop_sequences", "'stop_sequences' must be a list of strings")
    return value


_OPENAI_NAMES = [  # a refusal of parse_chat's, named as the Anthropic body names it
    (re.compile(r"tools\[(\d+)\]\.function\.parameters"), r"tools[\1].input_schema"),
    (re.compile(r"tools\[(\d+)\]\.function\.(\w+)"), r"tools[\1].\2"),
    (re.compile(r"'stop(?=['\[])"), "'stop_sequences"),  # 'stop' and 'stop[0]'
    (re.compile(r"^stop(?=\[|$)"), "stop_sequences"),
    (re.compile(r"response_format\.json_schema\.schema"), "output_config.format.schema"),
    (re.compile(r"response_format"), "output_config.format"),
]


def _in_anthropic_terms(refusal: Refusal) -> Refusal:
    message, param = refusal.message, refusal.param
    for pattern, name in _OPENAI_NAMES:
        message = pattern.sub(name, message)
        param = pattern.sub(name, param) if param is not None else None
    return Refusal(refusal.code, message, param=param)
