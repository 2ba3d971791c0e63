"""A Responses API body -> a ChatRequest, refusing a bad or unsupported field with a 400
that names it (in OpenAI's error shape: the server's default).

As the Anthropic dialect does (app/server/anthropic/request.py), the body is checked here,
then written as the OpenAI chat body it means and read by schemas.parse_chat, so sampling,
tools, grammars and the reasoning controls are the chat route's own: `instructions` is the
first (system) message, message items are messages, `function_call` items an assistant's
`tool_calls`, `function_call_output` items `tool` messages, `reasoning` items the next
assistant message's `reasoning_content`; `max_output_tokens` is `max_tokens`, `text.format`
is `response_format`, `reasoning.effort` is `reasoning_effort` (and the chat route's
`thinking_token_budget` is taken as it is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...images import ImageRefused, image_from_url
from ...images.parts import with_images
from ...images.refusal import TEXT_ONLY
from ...request import ChatRequest, Refusal, RefusalCode
from .. import schemas
from ..errors import invalid

ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text", "text")
# items this server does not run or read (hosted tools' calls, media, MCP, ...): a 400
# naming them; any other unknown type is refused the same way
ITEMS = ("message", "function_call", "function_call_output", "reasoning")
FORMATS = ("text", "json_object", "json_schema")


def store_of(body: Mapping[str, Any]) -> bool:
    """`store`: keep the response for previous_response_id (OpenAI's default: true)."""
    store = body.get("store")
    if store is None:
        return True
    if not isinstance(store, bool):
        raise invalid("store", "'store' must be true or false")
    return store


def previous_of(body: Mapping[str, Any]) -> str | None:
    """`previous_response_id`: the stored response this one continues, if any."""
    previous = body.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise invalid("previous_response_id", "'previous_response_id' must be a response id")
    return previous


def input_items(value: Any) -> list[dict[str, Any]]:
    """`input` as a list of items (a string is one user message)."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise invalid("input", "'input' must be a string or a non-empty list of input items")
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise invalid(f"input[{i}]", f"'input[{i}]' must be an input item (an object)")
    return [dict(item) for item in value]


def parse_responses(body: Mapping[str, Any], items: list[dict[str, Any]],
                    context_length: int, *, sees_images: bool = False) -> ChatRequest:
    """The chat request of a Responses body whose whole input (the earlier responses'
    items before its own, for `previous_response_id`) is `items`; a user's input_image
    parts are taken when the model `sees_images` (#52)."""
    _refuse_unsupported(body)
    tools = _tools(body.get("tools"))
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise invalid("instructions", "'instructions' must be a string")
    system = [{"role": "system", "content": instructions}] if instructions else []
    reasoning = body.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, Mapping):
        raise invalid("reasoning", "'reasoning' must be an object")
    conversation = system + messages(items, sees_images)
    if not conversation:  # only reasoning items: a prompt with nothing in it, as the
        # engine refuses an empty prompt (not a bad field: the document allows it)
        raise Refusal(RefusalCode.INVALID_REQUEST, "the input holds no message (only "
                      "reasoning items) and there are no instructions: nothing to answer",
                      param="input")
    openai = {"model": schemas.model_name(body), "messages": conversation,
              "tools": tools or None, "tool_choice": _tool_choice(body.get("tool_choice")),
              "parallel_tool_calls": body.get("parallel_tool_calls"),
              "response_format": _format(body.get("text")),
              "reasoning_effort": (reasoning or {}).get("effort"),
              # vLLM's name for a thinking budget, as the chat route takes it (an extension)
              "thinking_token_budget": body.get("thinking_token_budget"),
              "max_tokens": body.get("max_output_tokens"),
              "temperature": body.get("temperature"), "top_p": body.get("top_p"),
              "stream": body.get("stream"),
              # the context overflow policy, by the chat route's names (schemas.py), else
              # OpenAI's own `truncation` (None: the server's default)
              "context_overflow": body.get("context_overflow") or TRUNCATION.get(
                  body.get("truncation")),
              "contextOverflowPolicy": body.get("contextOverflowPolicy")}
    try:
        return schemas.parse_chat({k: v for k, v in openai.items() if v is not None},
                                  context_length)
    except Refusal as refusal:
        raise _in_responses_terms(refusal) from None


# OpenAI's `truncation` as a context overflow policy (app/request/overflow.py): "auto" drops
# input items from the middle of the conversation, "disabled" fails a prompt that is too long
TRUNCATION = {"auto": "truncate_middle", "disabled": "stop"}


def _refuse_unsupported(body: Mapping[str, Any]) -> None:
    if body.get("background") is not None and body["background"] is not False:
        raise invalid("background", "'background' responses are not supported: run it in "
                                    "the foreground (stream it to see it as it comes)")
    for name in ("conversation", "prompt"):
        if body.get(name) is not None:
            raise invalid(name, f"'{name}' is not supported here: send the input itself, "
                                "or continue with 'previous_response_id'")
    if body.get("truncation") not in (None, *TRUNCATION):
        raise invalid("truncation", "'truncation' must be 'auto' (drop turns from the "
                                    "middle to fit the context) or 'disabled' (refuse)")


# -- the conversation -----------------------------------------------------------------------
def has_images(items: list[dict[str, Any]]) -> bool:
    """Whether input items carry input_image parts (read off the loop: handler.py)."""
    return any(isinstance(item.get("content"), list) and any(
        isinstance(p, Mapping) and p.get("type") == "input_image" for p in item["content"])
        for item in items)


def messages(items: list[dict[str, Any]], sees_images: bool = False) -> list[dict[str, Any]]:
    """Input items as OpenAI chat messages, in order: consecutive function calls join one
    assistant message, as a chat template expects."""
    out: list[dict[str, Any]] = []
    thought: list[str] = []  # reasoning items, for the next assistant message
    for i, item in enumerate(items):
        at = f"input[{i}]"
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in ITEMS:
            raise invalid(f"{at}.type", f"'{at}.type' is '{kind}': this server reads "
                          f"{', '.join(ITEMS)} items only ('{kind}' is not supported)")
        if kind == "reasoning":
            thought.append(_reasoning_text(item, at))
        elif kind == "function_call":
            call = _call(item, at)
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and not thought \
                    and (last.get("tool_calls") or not last["content"]):
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append(_assistant("", thought) | {"tool_calls": [call]})
                thought = []
        elif kind == "function_call_output":
            out.append(_output(item, at))
        else:
            role = item.get("role")
            if role not in ROLES:
                raise invalid(f"{at}.role", f"'{at}.role' must be one of {', '.join(ROLES)}")
            if role == "user":  # its images (#52) after its text, as image_url parts
                out.append({"role": "user", "content": _user_content(
                    item.get("content"), f"{at}.content", sees_images)})
                continue
            text = _content(item.get("content"), f"{at}.content")
            if role == "assistant":
                out.append(_assistant(text, thought))
                thought = []
            else:
                out.append({"role": "system" if role == "developer" else role,
                            "content": text})
    return out


def _assistant(text: str, thought: list[str]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if thought:
        message["reasoning_content"] = "\n".join(thought)
    return message


def _user_content(value: Any, where: str, sees_images: bool) -> Any:
    """A user message's content: its text parts joined (_content), then its input_image
    parts read with app.images, for a model that sees images; a 400 naming the part for a
    text-only model, a URL (nothing is fetched) or a bad image."""
    if not isinstance(value, list) or not any(
            isinstance(p, Mapping) and p.get("type") == "input_image" for p in value):
        return _content(value, where)
    images = []
    for j, part in enumerate(value):
        at = f"{where}[{j}]"
        if not (isinstance(part, Mapping) and part.get("type") == "input_image"):
            continue
        if not sees_images:
            raise invalid(at, f"'{at}' is an image, and this model {TEXT_ONLY}: send text "
                              "only, or serve a vision model")
        url = part.get("image_url")
        if not isinstance(url, str):
            raise invalid(f"{at}.image_url", f"'{at}.image_url' must be a base64 data URL "
                                             "(file_id is not supported: no files are kept)")
        try:
            images.append(image_from_url(url))
        except ImageRefused as refused:
            raise invalid(f"{at}.image_url", f"'{at}.image_url' cannot be used: "
                                             f"{refused.reason}") from None
    return with_images(_content(value, where, images_taken=True), images)


def _content(value: Any, where: str, *, images_taken: bool = False) -> str:
    """A message's content: a string, or text parts (input_text / output_text) joined
    (`images_taken`: its input_image parts were read by _user_content)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise invalid(where, f"'{where}' must be a string or a list of content parts")
    texts = []
    for j, part in enumerate(value):
        at = f"{where}[{j}]"
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "input_image" and images_taken:
            continue
        if kind == "input_image":
            raise invalid(f"{at}.type", f"'{at}.type' is 'input_image': images are read in "
                                        "a user message only")
        if kind not in TEXT_PARTS:
            raise invalid(f"{at}.type", f"'{at}.type' is '{kind}': this server reads text "
                          "and image parts only (input_text, output_text, input_image); "
                          "files are not supported here yet")
        text = part.get("text")
        if not isinstance(text, str):
            raise invalid(at, f"'{at}' must carry its text as a string")
        texts.append(text)
    return "\n".join(texts)


def _reasoning_text(item: Mapping[str, Any], where: str) -> str:
    """A reasoning item's text: its content's reasoning_text parts, else its summary's."""
    texts: dict[str, list[str]] = {}
    for name in ("content", "summary"):
        parts = item.get(name)
        if parts is None:
            parts = []
        if not isinstance(parts, list) or not all(
                isinstance(p, Mapping) and isinstance(p.get("text"), str) for p in parts):
            raise invalid(f"{where}.{name}", f"'{where}.{name}' must be a list of text parts")
        texts[name] = [p["text"] for p in parts]
    return "\n".join(texts["content"] or texts["summary"])


def _call(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    call_id, name, args = item.get("call_id"), item.get("name"), item.get("arguments")
    if not all(isinstance(v, str) and v for v in (call_id, name)) \
            or not isinstance(args, str):
        raise invalid(where, f"'{where}' must be {{\"type\": \"function_call\", \"call_id\", "
                             "\"name\", \"arguments\"}")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _output(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str) or not call_id:
        raise invalid(f"{where}.call_id", f"'{where}.call_id' must be the call_id of the "
                                          "function_call this answers")
    text = output if isinstance(output, str) else _content(output, f"{where}.output")
    return {"role": "tool", "tool_call_id": call_id, "content": text}


# -- tools and formats ----------------------------------------------------------------------
def _tools(value: Any) -> list[dict[str, Any]]:
    """Function tools as the chat route's; hosted tools (web_search, file_search, computer
    use, code_interpreter, mcp, ...) are refused by name: this server runs none."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid("tools", "'tools' must be a list of tools")
    out = []
    for i, tool in enumerate(value):
        at = f"tools[{i}]"
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind != "function":
            raise invalid(f"{at}.type", f"'{at}.type' is '{kind}': this server runs function "
                          f"tools only ('{kind}' tools are not supported)")
        if tool.get("strict") is not None and not isinstance(tool["strict"], bool):
            raise invalid(f"{at}.strict", f"'{at}.strict' must be true or false")
        fn = {k: tool[k] for k in ("name", "description", "parameters")
              if tool.get(k) is not None}
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(value: Any) -> Any:
    if value is None or value in ("auto", "none", "required"):
        return value
    if isinstance(value, Mapping) and value.get("type") == "function":
        return {"type": "function", "function": {"name": value.get("name")}}
    raise invalid("tool_choice", "'tool_choice' must be auto, none, required or "
                                 "{\"type\": \"function\", \"name\": ...}")


def _format(text: Any) -> dict[str, Any] | None:
    """`text.format` as the chat route's response_format."""
    if text is None:
        return None
    if not isinstance(text, Mapping):
        raise invalid("text", "'text' must be an object")
    fmt = text.get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind not in FORMATS:
        raise invalid("text.format", f"'text.format.type' must be one of {', '.join(FORMATS)}")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
    return {"type": "json_schema", "json_schema": schema}


_RENAMES = [("response_format.json_schema", "text.format"), ("response_format", "text.format"),
            ("max_tokens", "max_output_tokens"), ("reasoning_effort", "reasoning.effort"),
            ("messages", "input")]


def _in_responses_terms(refusal: Refusal) -> Refusal:
    """A refusal of parse_chat's, named as the Responses body names the field (tools'
    `function.` level is not in this body)."""
    message, param = refusal.message, refusal.param
    for old, new in [*_RENAMES, (".function.", ".")]:
        message = message.replace(old, new)
        param = param.replace(old, new) if param is not None else None
    return Refusal(refusal.code, message, param=param)
