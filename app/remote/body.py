"""The OpenAI chat-completions request body for a chat and the engine's sampling settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.public import SamplingParams


def sampling_of(params: SamplingParams | Mapping[str, Any] | None) -> SamplingParams:
    """Validated settings, exactly as the engine would take them (same errors)."""
    from engine.public import SamplingParams  # mlx-free, but engine code: lazily

    if params is None:
        return SamplingParams()
    if isinstance(params, SamplingParams):
        return params
    return SamplingParams.from_dict(params)


def chat_body(model: str, messages: Sequence[Mapping[str, Any]],
              params: SamplingParams) -> dict[str, Any]:
    """Streamed, with a usage chunk at the end; non-OpenAI knobs only when they are on."""
    body: dict[str, Any] = {
        "model": model,
        # Not the engine's token_ids hint (it means nothing to a server); a reply's
        # tool_calls and a tool result's tool_call_id / name go as OpenAI has them.
        "messages": [{k: v for k, v in m.items()
                      if k in ("role", "content", "tool_calls", "tool_call_id", "name")}
                     for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
    }
    if params.stop:
        body["stop"] = list(params.stop)
    if params.seed is not None:
        body["seed"] = params.seed
    # vLLM, SGLang, llama.cpp and mlx_lm.server read these extra fields; OpenAI itself would
    # refuse them, so they go only when they change something.
    if params.top_k:
        body["top_k"] = params.top_k
    if params.min_p:
        body["min_p"] = params.min_p
    if params.repetition_penalty != 1.0:
        body["repetition_penalty"] = params.repetition_penalty
    return body
