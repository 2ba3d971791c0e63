"""A request for a reply, as a value: what the API server reads from an OpenAI-shaped body
(app/server/schemas.py) and what a tab asks for (app/request/tab.py). Both makers check
their own input and word its errors; `app/request/engine_input.py` alone turns the value
into what the engine takes (the prompt, the grammar, each choice's sampling settings)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.public import Controls, SamplingParams

if TYPE_CHECKING:
    from ..tools import Tool


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """A structured output asked for (plain text is None): any JSON object, or one schema.
    `raw` is OpenAI's `response_format` as given (what a remote server is sent)."""

    kind: str  # "json_object" | "json_schema"
    schema: Mapping[str, Any] | None = None  # json_schema's
    strict: bool = True  # json_schema's: no properties beyond the schema's
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One request: chat `messages` (OpenAI's shape; an assistant reply may carry its
    `token_ids`) or a completion `prompt`, its sampling settings and output constraints.

    `grammar` is the one the reply must follow, built by engine_input from
    `response_format` or from the forced tools (never both), so a bad schema is refused
    when the request is made. Tools: `tools` are rendered into the prompt; `tool_road`
    says the prompt goes through the tool template (or its fallback) even with none
    offered (a chat holding calls or results); `forced` constrains the reply to calls
    (HERMES' format); `call_tools` (OpenAI's shape) are the calls a reply may make."""

    kind: str = "chat"  # "chat" | "completion"
    model: str = ""
    messages: Sequence[Mapping[str, Any]] | None = None
    prompt: str | Sequence[int] | None = None  # completion: text or token ids
    params: SamplingParams | Mapping[str, Any] = field(default_factory=SamplingParams)
    response_format: ResponseFormat | None = None
    grammar: str | None = None
    tools: tuple[Tool, ...] = ()
    tool_road: bool = False
    forced: bool = False
    call_tools: tuple[Mapping[str, Any], ...] = ()
    # OpenAI's form: "auto" | "none" | "required" | {"type": "function", "function": {"name"}}
    # (app/request/tool_choice.py parses it, for the API server and the tabs alike)
    tool_choice: str | Mapping[str, Any] = "none"
    parallel_tool_calls: bool = True
    n: int = 1  # choices: n engine requests sharing the prompt; choice i samples with seed+i
    stream: bool = False
    include_usage: bool = False
    logprobs: int | None = None  # alternatives per token, None = no logprobs
    # a reasoning model's thinking on/off, effort and budget (app/request/reasoning.py
    # maps them onto the model's family), and the chat template's own variables as a
    # client sent them (`chat_template_kwargs`: they win over what the controls set)
    reasoning: Controls = field(default_factory=Controls)
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # what to do when the chat outgrows the context (app/request/overflow.py): "stop",
    # "truncate_middle" or "rolling_window"; None: the server's default (stop)
    context_overflow: str | None = None

    @property
    def call_names(self) -> list[str]:
        """The names of the functions a reply may call."""
        return [t["function"]["name"] for t in self.call_tools]


def plain_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages without the engine's `token_ids` hint, the one place they are dropped: for
    a prompt rendered in app (the tool road, the attachments' count) and for a remote
    server, none of which can splice them."""
    return [{k: v for k, v in m.items() if k != "token_ids"} for m in messages]
