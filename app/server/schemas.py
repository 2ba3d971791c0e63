"""OpenAI request bodies -> a ChatRequest (app/request), refusing a bad field with a 400 that
names it. Unknown fields are ignored (as vLLM does), so clients that send extras keep
working; known ones this server cannot honour are refused. The grammars are built here, by
app/request/engine_input.py, so a schema that cannot be used is refused with the body."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..attachments.messages import ATTACHMENTS
from ..request import ChatRequest, Refusal, RefusalCode, ResponseFormat
from ..request.tool_choice import CHOICES, ToolChoice, parse_tool_choice
from .errors import bad_schema, invalid
from .file_parts import take_files
from .image_parts import read_part

MAX_TOP_LOGPROBS = 20  # = engine.sampling_params.MAX_TOP_LOGPROBS (OpenAI's limit)
MAX_STOP = 16
MAX_N = 8  # choices per request (`n`): each is one engine request
TOOL_CHOICES = CHOICES  # tool_choice's words (app/request/tool_choice.py parses it)
ROLES = ("system", "developer", "user", "assistant", "tool")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
# Accepted only as null or a neutral value (of the same JSON type: `false` is not 0):
# anything else would be silently ignored otherwise.
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "presence_penalty": (0,), "frequency_penalty": (0,), "best_of": (1,), "echo": (False,),
    "suffix": (), "functions": ([],), "function_call": (), "logit_bias": ({},)}
# Chat's tool fields, which a completion cannot use
COMPLETION_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "tools": ([],), "tool_choice": ("none",), "parallel_tool_calls": ()}


def parse_chat(body: Mapping[str, Any], default_max_tokens: int) -> ChatRequest:
    messages = _messages(body.get("messages"))
    top = _opt_int(body, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    wants = _opt_bool(body, "logprobs")
    if top is not None and not wants:
        raise invalid("top_logprobs", "'top_logprobs' needs 'logprobs': true")
    logprobs = (top or 0) if wants else None
    max_tokens = _opt_int(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _opt_int(body, "max_tokens", 1)
    choice, parallel = _tools(body)
    tools = choice.offered
    # tools offered, or a conversation holding calls or results: the prompt is rendered
    # with the tool template
    road = bool(tools) or any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    controls, kwargs = _reasoning(body)
    return _parsed("chat", body, messages=messages, logprobs=logprobs,
                   max_tokens=max_tokens or default_max_tokens, grammar=choice.grammar,
                   tools=tools, tool_choice=choice.openai, parallel_tool_calls=parallel,
                   tool_road=road, forced=bool(choice.forced),
                   call_tools=tuple(t.openai() for t in tools),
                   reasoning=controls, template_kwargs=kwargs,
                   context_overflow=_overflow(body))


def parse_completion(body: Mapping[str, Any], default_max_tokens: int) -> ChatRequest:
    _neutral(body, COMPLETION_NEUTRAL, " (a completion has no tools)")
    return _parsed("completion", body, prompt=_prompt(body.get("prompt")),
                   logprobs=_opt_int(body, "logprobs", 0, MAX_TOP_LOGPROBS),
                   max_tokens=_opt_int(body, "max_tokens", 1) or default_max_tokens)


def model_name(body: Mapping[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model", "'model' is required: a model id from GET /v1/models")
    return model


# -- the shared fields ----------------------------------------------------------------------
def _neutral(body: Mapping[str, Any], fields: Mapping[str, tuple[Any, ...]],
             why: str = "") -> None:
    for name, accepted in fields.items():
        value = body.get(name)
        if value is not None and not any(_same(value, a) for a in accepted):
            raise invalid(name, f"'{name}' is not supported by this server{why}")


def _parsed(kind: str, body: Mapping[str, Any], *, max_tokens: int, logprobs: int | None,
            grammar: str | None = None, **what: Any) -> ChatRequest:
    from engine.public import SamplingParams

    _neutral(body, NEUTRAL)
    fmt, output = _response_format(body.get("response_format"))
    if output is not None and grammar is not None:
        raise invalid("response_format", "'response_format' cannot be combined with a "
                                         "forced tool call ('tool_choice')")
    grammar = grammar or output
    n = _opt_int(body, "n", 1, MAX_N) or 1
    temperature = _opt_number(body, "temperature", 0.0)
    top_p = _opt_number(body, "top_p", 0.0)
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise invalid("top_p", "'top_p' must be in (0, 1]")
    top_k = _opt_int(body, "top_k", -1)
    min_p = _opt_number(body, "min_p", 0.0)
    if min_p is not None and min_p >= 1.0:
        raise invalid("min_p", "'min_p' must be in [0, 1)")
    penalty = _opt_number(body, "repetition_penalty", 0.0)
    if penalty == 0.0:
        raise invalid("repetition_penalty", "'repetition_penalty' must be > 0")
    seed = _opt_int(body, "seed", 0)
    stream = bool(_opt_bool(body, "stream"))
    options = body.get("stream_options")
    if options is not None and not isinstance(options, Mapping):
        raise invalid("stream_options", "'stream_options' must be an object")
    include_usage = bool(_opt_bool(options or {}, "include_usage", "stream_options."))
    try:
        params = SamplingParams(
            temperature=1.0 if temperature is None else temperature,  # OpenAI's default
            top_p=1.0 if top_p is None else top_p,
            top_k=max(0, top_k or 0),  # -1 (vLLM's "off") = 0
            min_p=min_p or 0.0,
            repetition_penalty=1.0 if penalty is None else penalty,
            seed=seed, max_tokens=max_tokens, stop=_stop(body.get("stop")),
            logprobs=logprobs,
        )
    except ValueError as exc:  # a rule of the engine's own (each message starts with the name)
        field = str(exc).split(" ", 1)[0]
        raise invalid(field, f"'{field}' {str(exc).split(' ', 1)[-1]}") from None
    return ChatRequest(kind, model_name(body), params=params, stream=stream,
                       include_usage=include_usage, logprobs=logprobs, n=n,
                       response_format=fmt, grammar=grammar, **what)


def _reasoning(body: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(the reasoning controls, the chat template's variables): `reasoning_effort` (OpenAI's;
    "minimal" is taken as "low"), `thinking_token_budget` (vLLM's name for the budget),
    `chat_template_kwargs` (vLLM's and llama.cpp's; its `enable_thinking` is the switch)."""
    from engine.public import EFFORTS, Controls

    effort = body.get("reasoning_effort")
    if effort == "minimal":
        effort = "low"
    if effort is not None and effort not in EFFORTS:
        raise invalid("reasoning_effort", "'reasoning_effort' must be one of "
                                          f"{', '.join(EFFORTS)} (or minimal)")
    budget = _opt_int(body, "thinking_token_budget", 0)
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise invalid("chat_template_kwargs", "'chat_template_kwargs' must be an object")
    kwargs = dict(kwargs or {})
    switch = kwargs.get("enable_thinking")
    return Controls(thinking=switch if isinstance(switch, bool) else None, effort=effort,
                    budget=budget), kwargs


def _overflow(body: Mapping[str, Any]) -> str | None:
    """The context overflow policy (app/request/overflow.py): `context_overflow`, else LM
    Studio's `contextOverflowPolicy` (either takes its names or ours; both are checked);
    None: the server's default."""
    from ..request.overflow import parse_policy

    policies = []
    for name in ("context_overflow", "contextOverflowPolicy"):
        value = body.get(name)
        if value is not None:
            try:
                policies.append(parse_policy(value).value)
            except ValueError as exc:
                raise invalid(name, f"'{name}': {exc}") from None
    return policies[0] if policies else None


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise invalid("messages", "'messages' must be a non-empty list of messages")
    out = []
    for i, m in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(m, Mapping):
            raise invalid(where, f"'{where}' must be an object with 'role' and 'content'")
        role = m.get("role")
        if role not in ROLES:
            raise invalid(f"{where}.role", f"'{where}.role' must be one of {', '.join(ROLES)}")
        msg: dict[str, Any] = {"role": "system" if role == "developer" else role}
        calls = m.get("tool_calls") if role == "assistant" else None
        if calls is not None:
            msg["tool_calls"] = _calls(calls, f"{where}.tool_calls")
        if role == "assistant" and m.get("content") is None and msg.get("tool_calls"):
            msg["content"] = ""  # a reply of calls only
        else:
            content, files = take_files(m.get("content"), f"{where}.content", role)
            msg["content"] = _content(content, f"{where}.content", role)
            if files:  # the request road puts them in the prompt (app/request/attachments.py)
                msg[ATTACHMENTS] = files
        reasoning = m.get("reasoning_content", m.get("reasoning")) \
            if role == "assistant" else None
        if reasoning is not None:  # earlier thinking: the template keeps or drops it
            if not isinstance(reasoning, str):
                raise invalid(f"{where}.reasoning_content",
                              f"'{where}.reasoning_content' must be a string")
            msg["reasoning_content"] = reasoning
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise invalid(f"{where}.tool_call_id", f"'{where}.tool_call_id' must be the "
                                                       "id of the call this answers")
            msg["tool_call_id"] = call_id
        out.append(msg)
    return out


def _calls(value: Any, where: str) -> list[dict[str, Any]]:
    """An assistant message's tool calls, in OpenAI's shape (arguments: JSON object text)."""
    import json

    if not isinstance(value, list):
        raise invalid(where, f"'{where}' must be a list of tool calls")
    out = []
    for j, call in enumerate(value):
        at = f"{where}[{j}]"
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping) or call.get("type", "function") != "function" \
                or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise invalid(at, f"'{at}' must be {{\"id\", \"type\": \"function\", "
                              "\"function\": {\"name\", \"arguments\"}}")
        args = fn.get("arguments", "{}")
        if args == "":  # a call without arguments, as some clients write it
            args = "{}"
        try:
            parsed = json.loads(args) if isinstance(args, str) else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise invalid(f"{at}.function.arguments",
                          f"'{at}.function.arguments' must be a JSON object as text")
        call_id = call.get("id")
        out.append({"id": call_id if isinstance(call_id, str) else f"call_{j}",
                    "type": "function", "function": {"name": fn["name"], "arguments": args}})
    return out


def _response_format(value: Any) -> tuple[ResponseFormat | None, str | None]:
    """The structured output `response_format` asks for and its grammar (None: free
    text)."""
    from engine.public import GrammarError

    from ..request.engine_input import format_grammar

    if value is None:
        return None, None
    kind = value.get("type") if isinstance(value, Mapping) else None
    if kind not in RESPONSE_FORMATS:
        raise invalid("response_format", "'response_format.type' must be one of "
                                         f"{', '.join(RESPONSE_FORMATS)}")
    if kind == "text":
        return None, None
    if kind == "json_object":
        fmt = ResponseFormat("json_object", raw=value)
        return fmt, format_grammar(fmt)
    spec = value.get("json_schema")
    if not isinstance(spec, Mapping) or not all(
            isinstance(spec.get(k), str | None) for k in ("name", "description")):
        raise invalid("response_format", "'response_format.json_schema' must be "
                                         "{\"name\", \"schema\", \"strict\"}")
    schema, strict = spec.get("schema"), spec.get("strict")
    if not isinstance(schema, Mapping):
        raise invalid("response_format", "'response_format.json_schema.schema' must be a "
                                         "JSON schema (an object)")
    if strict is not None and not isinstance(strict, bool):
        raise invalid("response_format", "'response_format.json_schema.strict' must be "
                                         "true or false")
    fmt = ResponseFormat("json_schema", schema, strict=bool(strict), raw=value)
    try:
        return fmt, format_grammar(fmt)
    except GrammarError as exc:
        raise bad_schema("response_format", f"'response_format.json_schema.schema' cannot "
                                            f"be used: {exc}") from None


def _tools(body: Mapping[str, Any]) -> tuple[ToolChoice, bool]:
    """(`tools` with `tool_choice`, app/request/tool_choice.py's reading; parallel_tool_calls)."""
    from ..tools import ToolSpecError, parse_tools

    raw = body.get("tools")
    try:
        tools = parse_tools(raw) if raw is not None else []
    except ToolSpecError as exc:
        raise (bad_schema if exc.schema else invalid)(exc.field, str(exc)) from None
    parallel = _opt_bool(body, "parallel_tool_calls")
    parallel = True if parallel is None else parallel
    return parse_tool_choice(body.get("tool_choice"), tools, parallel=parallel), parallel


def _content(value: Any, where: str, role: str = "user") -> str | list[dict[str, Any]]:
    """A string, or a list of text parts (joined into one string), or, with images, the
    list of its text and image_url parts, each image read (image_parts.py; the parts keep
    their indices, so a refusal names the part as sent). Audio is refused; file parts
    were taken out by file_parts.take_files."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list[dict[str, Any]] = []
        for j, part in enumerate(value):
            if isinstance(part, Mapping) and part.get("type") == "image_url":
                parts.append(read_part(part, f"{where}[{j}]", role))
                continue
            if not (isinstance(part, Mapping) and part.get("type") == "text"
                    and isinstance(part.get("text"), str)):
                raise invalid(f"{where}[{j}]", f"'{where}[{j}]' must be a text or image_url "
                                               "part")
            parts.append({"type": "text", "text": part["text"]})
        if any(p["type"] == "image_url" for p in parts):
            return parts
        return "".join(p["text"] for p in parts)
    raise invalid(where, f"'{where}' must be a string or a list of text parts")


def _prompt(value: Any) -> str | list[int]:
    """One prompt: a string or a list of token ids (or either wrapped in a one-item list)."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str | list):
        value = value[0]
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(map(_integral, value)):
        return [int(t) for t in value]
    raise invalid("prompt", "'prompt' must be one string or one list of token ids")


def _integral(value: Any) -> bool:
    """An integer as JSON Schema counts them: 3 and 3.0, not true or 3.5."""
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if (not isinstance(stops, list) or len(stops) > MAX_STOP
            or not all(isinstance(s, str) and s for s in stops)):
        raise invalid("stop", f"'stop' must be a non-empty string or a list of at most "
                              f"{MAX_STOP} of them")
    return tuple(stops)


def _same(value: Any, neutral: Any) -> bool:
    """Equal as JSON values: 0 == 0.0, but false != 0 and 1 != true."""
    return value == neutral and isinstance(value, bool) == isinstance(neutral, bool)


def _opt_number(body: Mapping[str, Any], name: str, minimum: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not _finite(value):
        raise invalid(name, f"'{name}' must be a number")
    if value < minimum:
        raise invalid(name, f"'{name}' must be >= {minimum:g}")
    return float(value)


def _finite(value: float) -> bool:
    """A JSON integer like 1e400 written out in full is no float (OverflowError otherwise)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _opt_int(body: Mapping[str, Any], name: str, minimum: int,
             maximum: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not _integral(value):  # 16.0 is an integer in JSON Schema (and to vLLM)
        raise invalid(name, f"'{name}' must be an integer")
    value = int(value)
    if value < minimum:
        raise invalid(name, f"'{name}' must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise invalid(name, f"'{name}' must be <= {maximum}")
    return value


def _opt_bool(body: Mapping[str, Any], name: str, prefix: str = "") -> bool | None:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise invalid(prefix + name, f"'{prefix}{name}' must be true or false")
    return value


def check_body(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise Refusal(RefusalCode.INVALID_JSON, "the request body must be a JSON object")
    return body
