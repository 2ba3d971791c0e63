"""A request's prompt token ids: given directly, or built from chat messages with the
model's chat template (`render`, the one place it is applied: plain chats here, chats with
tools by engine/tool_template.py).

An assistant message may carry the ids that were generated for it (`token_ids`, which a
client gets from `RequestStream.tokens`). They are spliced into the prompt as they are
instead of re-tokenizing the reply's text: the same text can tokenize differently from
how it was generated, and the first differing id would end the prefix cache's reuse, so
with them a chat's next turn reuses everything but the new user message. Ids that no
longer decode to the message's content (the reply was edited, or cut at a stop string)
are ignored and the text is tokenized as usual.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from collections.abc import Sequence as Seq
from datetime import UTC, datetime
from typing import Any

from .errors import RequestRejected
from .text_check import lone_surrogate

ROLES = {"system", "user", "assistant", "tool"}


def token_ids(tokens: Seq[int], vocab_size: int) -> list[int]:
    """Validated prompt token ids."""
    tokens = list(tokens)
    if not tokens:
        raise RequestRejected("empty prompt: prompt_tokens has no tokens")
    bad = _invalid_ids(tokens, vocab_size)
    if bad:
        raise RequestRejected(f"prompt_tokens holds invalid token ids: {bad[:5]}")
    return tokens


def chat_tokens(tokenizer: Any, messages: Seq[Mapping[str, Any]], vocab_size: int,
                end_ids: Collection[int],
                template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
    """The templated prompt of `messages`, ready for the model's first decode step.
    `template_kwargs`: variables the template reads (`enable_thinking`,
    `reasoning_effort`…: engine/reasoning/controls.py). An assistant message's
    `reasoning_content` reaches the template as `reasoning_content` and as `thinking`
    (gpt-oss's name), which keeps or drops it as it was written to."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Seq):
        raise RequestRejected("messages must be a list of {'role', 'content'} mappings")
    spliced: dict[int, list[int]] = {}
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") not in ROLES \
                or not isinstance(m.get("content"), str):
            raise RequestRejected(
                f"messages[{i}] must be a mapping with role in {sorted(ROLES)} "
                "and string content"
            )
        bad = lone_surrogate(m["content"])
        if bad is not None:  # the tokenizer would fail with a bare TypeError
            raise RequestRejected(f"messages[{i}].content {bad}")
        ids = m.get("token_ids")
        if ids is None:
            continue
        if m["role"] != "assistant" or isinstance(ids, str | bytes) or not isinstance(ids, Seq) \
                or _invalid_ids(ids, vocab_size):
            raise RequestRejected(
                f"messages[{i}].token_ids must be a list of token ids of an assistant reply")
        ids = _strip_end(list(ids), end_ids)
        if m["content"] and m["content"] in _reply_texts(tokenizer, ids):
            spliced[i] = ids
    # a system message alone is a prompt (the template renders it, then the assistant's
    # turn); only a chat with no text in any message is empty
    if not any(m["content"].strip() for m in messages):
        raise RequestRejected("empty prompt: no message has any content")
    plain = [{"role": m["role"], "content": m["content"]} | _reasoning_of(m)
             for m in messages]
    try:
        return _splice(tokenizer, plain, spliced, dict(template_kwargs or {}))
    except Exception as exc:  # a template that refuses a role or an order, say
        raise RequestRejected(
            f"the model's chat template or tokenizer refused these messages: "
            f"{type(exc).__name__}: {exc}") from exc


def render(tokenizer: Any, messages: Seq[Mapping[str, Any]],
           tools: Seq[Mapping[str, Any]] | None = None, **kwargs: Any) -> str:
    """The model's chat template over `messages` (and `tools`), the assistant's turn opened.

    Where a template refuses what other templates take, it gets what llama.cpp gives it:
    - a template without a system role (Gemma 2 raises "System role not supported") gets
      the system prompt at the head of the first user message;
    - a tool-use template that loops over `tools` unconditionally (Hermes 2/3, Command R+)
      gets an empty list when there are none;
    - Firefunction v2 reads the tools as `functions`, a JSON text, and the date as
      `datetime` (llama.cpp's common/chat.cpp gives it both; the day only here, where
      llama.cpp gives the second too, so that a chat's next turn keeps its cached prefix).
    Anything else it raises is the caller's to report."""
    extra = dict(kwargs)
    extra.setdefault("functions", json.dumps(list(tools or []), indent=2))
    extra.setdefault("datetime", datetime.now(UTC).strftime("%b %d %Y"))

    def run(msgs: Seq[Mapping[str, Any]], tool_list: Any) -> str:
        return tokenizer.apply_chat_template([dict(m) for m in msgs], tools=tool_list,
                                             add_generation_prompt=True, tokenize=False,
                                             **extra)

    tool_list = list(tools) if tools else None
    try:
        return run(messages, tool_list)
    except TypeError as exc:
        if tool_list is not None or "not iterable" not in str(exc):
            raise
        tool_list = []
        return run(messages, tool_list)
    except Exception as exc:  # noqa: BLE001 - retried below, re-raised if that fails too
        merged = _system_into_first_user(messages)
        if merged is None:
            raise
        try:
            return run(merged, tool_list)
        except Exception:  # noqa: BLE001 - the first refusal is the one to report
            raise exc from None


def _system_into_first_user(messages: Seq[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
    """The system message's text put before the first user message's (None: no system
    message, or no user message after it)."""
    if not messages or messages[0].get("role") != "system":
        return None
    rest = [dict(m) for m in messages[1:]]
    for m in rest:
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            m["content"] = f"{messages[0].get('content', '')}\n\n{m['content']}"
            return rest
    return None


def prompt_text(tokenizer: Any, messages: Seq[Mapping[str, Any]],
                template_kwargs: Mapping[str, Any] | None = None) -> str:
    """The rendered prompt of `messages` as `chat_tokens` renders it, as text (no
    tokenizing: where a reasoning model's reply starts, engine/reasoning); "" where the
    template refuses them (the request's submit says why)."""
    try:
        return render(tokenizer, [{"role": m["role"], "content": m["content"]}
                                  | _reasoning_of(m) for m in messages],
                      **dict(template_kwargs or {}))
    except Exception:  # noqa: BLE001 - refused: said by chat_tokens at submit
        return ""


def _reasoning_of(message: Mapping[str, Any]) -> dict[str, str]:
    text = message.get("reasoning_content")
    if message.get("role") != "assistant" or not isinstance(text, str) or not text:
        return {}
    return {"reasoning_content": text, "thinking": text}


def _splice(tokenizer: Any, messages: list[dict[str, str]],
            spliced: dict[int, list[int]], kwargs: dict[str, Any]) -> list[int]:
    """Tokenize the templated prompt, with the given ids in place of those messages'
    contents. The template is rendered once with a marker in place of each such content to
    find where it goes; if the markers don't come out once each, or the text with the
    contents put back differs from the real rendering (a template that rewrites content),
    the whole text is tokenized instead."""
    def encode(part: str) -> list[int]:
        return list(tokenizer.encode(part, add_special_tokens=False)) if part else []

    text = render(tokenizer, messages, **kwargs)
    if not spliced:
        return encode(text)
    marks = {i: f"\x00batchchat-reply-{i}\x00" for i in spliced}
    parts = [render(tokenizer, [m | {"content": marks[i]} if i in marks else m
                                for i, m in enumerate(messages)], **kwargs)]
    for i in spliced:  # cut the rendering at each marker, in order
        head, sep, tail = parts[-1].partition(marks[i])
        if not sep or marks[i] in tail:
            return encode(text)
        parts[-1:] = [head, tail]
    rebuilt = parts[0] + "".join(messages[i]["content"] + part
                                 for i, part in zip(spliced, parts[1:], strict=True))
    if rebuilt != text:
        return encode(text)
    tokens: list[int] = []
    for part, ids in zip(parts, [*spliced.values(), []], strict=True):
        tokens += encode(part) + ids
    return tokens


def _reply_texts(tokenizer: Any, ids: list[int]) -> tuple[str, str]:
    """The text the engine streamed for these ids (the same detokenizers, so the same
    text): read after a prompt (detokenize.after; a newline stands for the prompt's end,
    which only decides that the reply's first space is kept), and read alone, as replies
    were before issue #46 (their first space dropped), so that saved chats still splice."""
    from .detokenize import after

    texts = []
    for context in (tokenizer.encode("\n", add_special_tokens=False), []):
        detok, skip = after(tokenizer, context)
        for t in ids:
            detok.add_token(t)
        detok.finalize()
        texts.append(detok.text[skip:])
    return texts[0], texts[1]


def _strip_end(ids: list[int], end_ids: Collection[int]) -> list[int]:
    """A reply's ids without the end-of-turn token it stopped on (never part of its text)."""
    while ids and ids[-1] in end_ids:
        ids.pop()
    return ids


def _invalid_ids(tokens: Seq[Any], vocab_size: int) -> list[Any]:
    return [t for t in tokens if isinstance(t, bool) or not isinstance(t, int)
            or not 0 <= t < vocab_size]
