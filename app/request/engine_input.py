"""A ChatRequest as the engine takes it: the one place that decides the prompt (the chat
template with or without tools, reply `token_ids` kept or dropped, a completion's text
or ids), the grammar (`response_format`, or a call forced by `tool_choice`), and each
choice's sampling settings (`n`, seeds, the grammar and stop strings with them). The API
server and the tabs (app/bridge/routing.py) both call it; so does a tab's remote road,
for the body a remote server is sent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from engine.public import (
    SamplingParams,
    json_object_grammar,
    json_schema_grammar,
)

from ..images.parts import image_parts
from ..images.refusal import IMAGES_WITH_TOOLS
from ..tools import CallFormat, Tool, call_grammar, tool_prompt
from . import attachments, overflow
from .chat_request import ChatRequest, ResponseFormat, plain_messages
from .images import engine_images
from .refusal import Refusal, RefusalCode


class Target(Protocol):
    """What a loaded model offers the prompt's making (app.bridge's LocalTarget is one)."""

    def tool_template(self) -> tuple[bool, str | None]: ...

    def chat_tokens(self, messages: Sequence[Mapping[str, Any]],
                    tools: Sequence[Mapping[str, Any]] | None = None,
                    template_kwargs: Mapping[str, Any] | None = None) -> list[int]: ...

    def encode(self, text: str) -> list[int]: ...

    def start_tokens(self) -> list[int]: ...

    @property
    def context_length(self) -> int: ...  # the attachments' budget (attachments.py)


# -- grammars -------------------------------------------------------------------------------
def format_grammar(fmt: ResponseFormat | None) -> str | None:
    """The grammar of a structured output (None: free text); the engine's GrammarError
    for a schema it cannot enforce (each maker words it for its own input)."""
    if fmt is None:
        return None
    if fmt.kind == "json_object":
        return json_object_grammar()
    return json_schema_grammar(dict(fmt.schema or {}), strict=fmt.strict)


def forced_call_grammar(tools: Sequence[Tool], *, parallel: bool) -> str:
    """The grammar forcing a reply of calls to `tools` (one, or `parallel` 1 to 4);
    ValueError (a GrammarError) when their schemas together cannot be used."""
    return call_grammar(tools, parallel=parallel)


# -- the prompt ------------------------------------------------------------------------------
def prompt(request: ChatRequest, target: Target) -> tuple[dict[str, Any], CallFormat | None]:
    """(what to submit: {"messages": …} or {"prompt_tokens": …}, the format the reply's
    calls are parsed in: None when no tools are offered). Plain chat messages go to the
    engine whole (its template splices reply `token_ids`); the tool road renders here
    (app.tools: the model's tool template, else the fallback section). RequestRejected
    if the template refuses the messages. Attached files become message text first
    (attachments.py: whole, or the passages that fit)."""
    request, _ = attachments.fitted(request, target)
    if request.messages is None:
        if isinstance(request.prompt, str):  # "" starts from the start-of-text token
            return {"prompt_tokens": target.encode(request.prompt) or target.start_tokens()}, \
                None
        return {"prompt_tokens": list(request.prompt or ())}, None
    kwargs = {"template_kwargs": dict(request.template_kwargs)} \
        if request.template_kwargs else {}
    # images (#52): the engine's image parts, their bytes beside (Engine.submit's images)
    messages, images = engine_images(request.messages)
    if images and request.tool_road:
        part = next(image_parts(request.messages))
        raise Refusal(RefusalCode.INVALID_REQUEST, f"{part}: {IMAGES_WITH_TOOLS}", param=part)
    if not request.tool_road:
        return {"messages": messages} | kwargs | ({"images": images} if images else {}), None
    return tool_prompt(target, plain_messages(request.messages), request.tools,
                       forced=request.forced, template_kwargs=request.template_kwargs)


def prompt_length(request: ChatRequest, target: Any) -> int:
    """How many tokens `request`'s prompt is for `target` (a LocalTarget: its
    `prompt_tokens`), rendered as `prompt` renders it."""
    what, _ = prompt(request, target)
    if "prompt_tokens" in what:
        return len(what["prompt_tokens"])
    return len(target.prompt_tokens(what["messages"], what.get("template_kwargs"),
                                    **({"images": what["images"]} if "images" in what else {})))


def overflow_fitted(request: ChatRequest, target: Any) -> tuple[ChatRequest, overflow.Dropped]:
    """`request` with whole turns dropped by its context overflow policy until its prompt
    leaves room for the reply in `target`'s context (overflow.py); unchanged under `stop`
    or when it fits. Call it after attachments are made text (their fit comes first)."""
    policy = overflow.parse_policy(request.context_overflow or "stop")
    if policy is overflow.Policy.STOP or request.messages is None:
        return request, overflow.Dropped()
    context = target.context_length
    messages, dropped = overflow.fit(
        request.messages, lambda m: prompt_length(replace(request, messages=m), target),
        context_length=context, answer_room=attachments.answer_room(request, context),
        policy=policy)
    return (replace(request, messages=messages) if dropped else request), dropped


# -- sampling --------------------------------------------------------------------------------
def choice_seed(seed: int | None, i: int) -> int | None:
    """Choice i's seed: with a seed s, s + i (so an n=1 request with seed s + i gives
    choice i); without one, each draws its own."""
    return seed if seed is None or i == 0 else seed + i


def choice_params(request: ChatRequest) -> list[SamplingParams | dict[str, Any]]:
    """Each choice's sampling settings, the request's grammar with them."""
    params = request.params
    if isinstance(params, SamplingParams):
        if request.grammar is not None:
            params = replace(params, grammar=request.grammar)
        return [replace(params, seed=choice_seed(params.seed, i)) if i else params
                for i in range(request.n)]
    out = dict(params) | ({"grammar": request.grammar} if request.grammar is not None else {})
    seed = out.get("seed")
    return [out if not i or not isinstance(seed, int) else out | {"seed": seed + i}
            for i in range(request.n)]


# -- a remote server -------------------------------------------------------------------------
def remote_call(request: ChatRequest) -> tuple[list[dict[str, Any]], Any, dict[str, Any]]:
    """(messages, sampling settings, extra body fields) for a remote OpenAI-compatible
    server: the format goes as `response_format`, tools and `tool_choice` as OpenAI's, a
    reasoning model's controls as `reasoning_effort`, `thinking_token_budget` and
    `chat_template_kwargs` (vLLM's and llama.cpp's names)."""
    extra: dict[str, Any] = {}
    if request.response_format is not None:
        extra["response_format"] = dict(request.response_format.raw)
    controls = request.reasoning
    if controls.effort is not None:
        extra["reasoning_effort"] = controls.effort
    if controls.budget is not None:
        extra["thinking_token_budget"] = controls.budget
    kwargs = dict(request.template_kwargs)
    if controls.thinking is not None:
        kwargs.setdefault("enable_thinking", controls.thinking)
    if kwargs:
        extra["chat_template_kwargs"] = kwargs
    if request.call_tools:  # tool_choice is in OpenAI's form already (tool_choice.py)
        extra |= {"tools": list(request.call_tools), "tool_choice": request.tool_choice}
    return plain_messages(attachments.whole(request.messages or ())), request.params, extra
