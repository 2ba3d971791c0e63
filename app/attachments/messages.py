"""Attachments riding on chat messages: a message (OpenAI's shape, a dict) may carry its
files under ATTACHMENTS until the request road turns them into text (app/request/
attachments.py). Messages are fitted in order, so an earlier message's document keeps its
whole framing on a follow-up (the same tokens: the prefix cache reuses them) and a later
one gets what room is left; when they do not all fit whole, the last message's files are
kept at least half the budget."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..images.parts import text_of, with_text
from .attachment import Attachment
from .fit import Fitted, fit, whole_tokens
from .framing import user_content
from .index import IndexCache

ATTACHMENTS = "attachments"  # the key, holding a tuple of Attachment


def attachments_of(message: Mapping[str, Any]) -> tuple[Attachment, ...]:
    return tuple(message.get(ATTACHMENTS) or ())


def has_attachments(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(attachments_of(m) for m in messages)


def without_attachments(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as if nothing were attached (what the rest of the prompt costs)."""
    return [{k: v for k, v in m.items() if k != ATTACHMENTS} for m in messages]


def whole_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every attachment framed whole into its message (a remote server: its tokenizer is
    not here to count with; it refuses what does not fit)."""
    out = without_attachments(messages)
    for m, original in zip(out, messages, strict=True):
        if atts := attachments_of(original):
            # a message with images (#52): the files framed into its text part
            m["content"] = with_text(m.get("content"), user_content(text_of(m.get("content")),
                                                                    atts))
    return out


def fitted_messages(messages: Sequence[Mapping[str, Any]], *,
                    encode: Callable[[str], list[int]], budget_tokens: int,
                    cache: IndexCache) -> tuple[list[dict[str, Any]], list[Fitted]]:
    """(the messages with their attachments whole or retrieved within `budget_tokens`
    together, each message's Fitted in order)."""
    out = without_attachments(messages)
    fitted: list[Fitted] = []
    left = budget_tokens
    carrying = [i for i, m in enumerate(messages) if attachments_of(m)]
    # when not everything fits whole, earlier messages' files leave the last one at least
    # half the budget: the question being asked now gets its passages
    everything = [a for i in carrying for a in attachments_of(messages[i])]
    reserve = 0 if whole_tokens(everything, encode, budget_tokens) is not None \
        else budget_tokens // 2
    for i, (m, original) in enumerate(zip(out, messages, strict=True)):
        atts = attachments_of(original)
        if not atts:
            continue
        room = left if i == carrying[-1] else left - reserve
        got = fit(text_of(m.get("content")), atts, encode=encode,
                  budget_tokens=max(0, room), cache=cache)
        m["content"] = with_text(m.get("content"), got.content)
        fitted.append(got)
        left -= got.tokens
    return out, fitted


_shared: IndexCache | None = None


def shared_cache() -> IndexCache:
    """The process's index cache (tabs and API requests share indexes of the same file)."""
    global _shared
    if _shared is None:
        _shared = IndexCache()
    return _shared
