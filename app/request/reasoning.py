"""A request for a reasoning model made ready for the engine (issue #49): the controls
mapped onto the model's family (engine.public's reasoning: template variables, the
system-prompt switch), the chat template's own variables on top, and the grammar that
keeps the thinking within its budget and a response format off the thinking. What the
reply's parser needs (the style, and whether the prompt opened the thinking) comes back
with it, for the API's replies and the tabs' messages to split the text the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from engine.public import (
    GrammarError,
    ReasoningStyle,
    budget_grammar,
    lark_grammar,
    starts_inside,
    template_kwargs,
    with_switch,
)

from ..tools import call_rules
from .chat_request import ChatRequest
from .refusal import Refusal
from .tool_choice import parse_tool_choice


class Target(Protocol):
    def reasoning_style(self) -> ReasoningStyle | None: ...

    def prompt_text(self, messages: Sequence[Mapping[str, Any]],
                    template_kwargs: Mapping[str, Any]) -> str: ...

    def token_of(self, text: str) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Shape:
    """How a reply to this request is split: the model's style, whether its prompt left
    the reply inside the thinking, and the id of the token that ends the thinking where
    it is one (the reasoning tokens of a local reply are then counted exactly)."""

    style: ReasoningStyle
    inside: bool
    end_token: int | None = None


def prepared(request: ChatRequest, target: Target) -> tuple[ChatRequest, Shape | None]:
    """`request` with its messages, template variables and grammar made for this model's
    way of thinking, and the reply's Shape (None: the model does not think, or the request
    is a completion, whose text is returned as it is)."""
    style = target.reasoning_style() if request.messages is not None else None
    if style is None:
        return request, None
    controls = request.reasoning
    kwargs = template_kwargs(style, controls) | dict(request.template_kwargs)
    messages = with_switch(style, controls, request.messages or ())
    inside = starts_inside(style, target.prompt_text(messages, kwargs))
    ready = replace(request, messages=messages, template_kwargs=kwargs)
    grammar = _grammar(ready, style, inside, target)
    if grammar is not None:
        ready = replace(ready, grammar=grammar)
    return ready, Shape(style, inside, target.token_of(style.end))


def _grammar(request: ChatRequest, style: ReasoningStyle, inside: bool,
             target: Target) -> str | None:
    """The thinking grammar where one is needed: a budget, a response format (which then
    applies to the answer after the thinking), or a forced tool call (tool_choice
    `required` or a named function: the reply thinks, within its budget, then calls, as
    vLLM's and llama.cpp's grammars let a reasoning model do; thinking off, it calls at
    once under the call's own grammar)."""
    budget, fmt = request.reasoning.budget, request.response_format
    if (not request.forced and budget is None and fmt is None) \
            or request.reasoning.wants_thinking is False:
        return None
    schema, calls = None, None
    if request.forced:
        calls = _forced_rules(request)
        if calls is None:
            return None
    elif fmt is not None:
        schema = {"type": "object"} if fmt.kind == "json_object" else dict(fmt.schema or {})
    tokens = (not style.harmony and target.token_of(style.start) is not None,
              not style.harmony and target.token_of(style.end) is not None)
    try:
        return lark_grammar(budget_grammar(style, budget, inside=inside, answer_schema=schema,
                                           strict=fmt.strict if fmt else True,
                                           tag_tokens=tokens, answer_rules=calls))
    except GrammarError:
        return None  # the format's own grammar stays (checked when the request was made)


def _forced_rules(request: ChatRequest) -> str | None:
    """The forced call's Lark rules (top rule `answer`), among the tools tool_choice forces
    (the request's own grammar was built from the same; None if it cannot be again)."""
    try:
        choice = parse_tool_choice(request.tool_choice, request.tools,
                                   parallel=request.parallel_tool_calls)
        parallel = request.parallel_tool_calls and choice.mode == "required"
        return call_rules(choice.forced, parallel=parallel, top="answer") \
            if choice.forced else None
    except Refusal:  # the request's own grammar stays
        return None
