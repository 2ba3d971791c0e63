"""A request's attached files turned into message text (issue #51), on the request road:
whole when they fit the context with room for the answer, else their passages most
relevant to the message (app/attachments/fit.py). The budget is the model's context less
the prompt without the attachments and the reply's room (max_tokens, at most a quarter of
the context, so a default max_tokens of the whole context still leaves room for files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..attachments.fit import Fitted
from ..attachments.messages import (
    fitted_messages,
    has_attachments,
    shared_cache,
    whole_messages,
    without_attachments,
)
from .chat_request import ChatRequest, plain_messages


def _max_tokens(request: ChatRequest) -> int:
    params = request.params
    value = params.get("max_tokens") if isinstance(params, Mapping) \
        else getattr(params, "max_tokens", None)
    return int(value or 0)


def answer_room(request: ChatRequest, context_length: int) -> int:
    """Tokens kept for the reply when fitting attachments."""
    return min(_max_tokens(request) or context_length // 4, context_length // 4)


def fitted(request: ChatRequest, target: Any) -> tuple[ChatRequest, list[Fitted]]:
    """`request` with its messages' attachments as text for `target` (a LocalTarget: its
    tokenizer and context), and what each message got; unchanged without attachments."""
    messages = request.messages
    if messages is None or not has_attachments(messages):
        return request, []
    rest = len(target.chat_tokens(plain_messages(without_attachments(messages)), None,
                                  dict(request.template_kwargs) or None))
    budget = target.context_length - rest - answer_room(request, target.context_length)
    out, got = fitted_messages(messages, encode=target.encode, budget_tokens=budget,
                               cache=shared_cache())
    return replace(request, messages=out), got


def whole(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages with attachments framed whole (a remote server's body)."""
    return whole_messages(messages)
