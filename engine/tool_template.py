"""A chat with tools as a prompt: rendered by the chat template (`chat_prompt.render`, the
one function that applies it), and the probe of what the template and mlx-lm make of tools.
Not in engine.public (the probe reads mlx-lm); app/backend/local_target.py uses it through
`engine`'s lazy names."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as Seq
from typing import Any

from .chat_prompt import render
from .errors import RequestRejected


def tool_chat_tokens(tokenizer: Any, messages: Seq[Mapping[str, Any]],
                     tools: Seq[Mapping[str, Any]] | None = None,
                     template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
    """The prompt of a chat with tools (`tools` offered; calls and results in OpenAI's
    shape in `messages`), rendered by `render` whole: no reply ids are spliced (the
    messages hold what the template writes around calls). RequestRejected if the
    template refuses. `template_kwargs`: the template's variables (engine/reasoning)."""
    try:
        text = render(tokenizer, messages, tools, **dict(template_kwargs or {}))
    except Exception as exc:
        raise RequestRejected(f"the model's chat template refused these messages: "
                              f"{type(exc).__name__}: {exc}") from exc
    return list(tokenizer.encode(text, add_special_tokens=False))


def tool_support(tokenizer: Any) -> tuple[bool, str | None]:
    """(whether the model's chat template writes out `tools`, the mlx-lm tool parser of its
    family: a module name under mlx_lm.tool_parsers, or None). The template is rendered
    with a probe tool; the parser is picked as mlx-lm picks it."""
    probe = {"type": "function", "function": {
        "name": "batchchat_probe_tool", "description": "",
        "parameters": {"type": "object", "properties": {}}}}
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "x"}],
                                             tools=[probe], add_generation_prompt=True,
                                             tokenize=False)
        renders = "batchchat_probe_tool" in text
    except Exception:  # a template that refuses `tools`
        renders = False
    parser = getattr(tokenizer, "tool_parser", None)
    if parser is not None:
        return renders, parser.__module__.rsplit(".", 1)[-1]
    from mlx_lm.tokenizer_utils import _infer_tool_parser  # mlx-lm is pinned

    try:
        return renders, _infer_tool_parser(tokenizer)
    except Exception:
        return renders, None
