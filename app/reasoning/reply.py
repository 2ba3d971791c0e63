"""A reasoning model's reply in a tab (issue #49): its stream's text split into the
thinking (`ChatMessage.reasoning`) and the answer (`content`) at each frame, with how long
and how many tokens it thought.

The split reads the stream's whole text each frame (engine.public's ReasoningSplit, fed
at once), so the message holds the two parts and no splitter state; a tag still arriving
is held back until the reply ends. The thinking's time and tokens are taken at the last
frame that was still thinking (the local engine's token count; a remote reply has none);
at the end the tokens are counted exactly where the thinking ends on a token of its own
(Qwen3's `</think>`, gpt-oss's `<|end|>`): those up to it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from engine.public import ReasoningSplit

if TYPE_CHECKING:
    from .message_tree import ChatMessage

def take_text(msg: ChatMessage, gen: Any, *, final: bool = False) -> None:
    """Set `msg`'s answer (and thinking) from `gen`'s stream text; `final`: the reply ended
    (whatever was held back is given out)."""
    shape = gen.shape
    if shape is None:
        msg.content = gen.text  # the stream's text (its one copy), not a second accumulated
        remote = getattr(gen.stream, "reasoning", "")  # a server that split it (remote)
        if remote:
            msg.reasoning = remote
            _clock(msg, gen, thinking=not msg.content and not final)
            if final:  # the server's own count, where its usage says it
                details = (getattr(gen.stream, "usage", None) or {}).get(
                    "completion_tokens_details") or {}
                count = details.get("reasoning_tokens")
                msg.reasoning_tokens = count if isinstance(count, int) and count else None
        return
    fmt = getattr(gen, "call_format", None)  # calls that close the thinking: the answer's
    split = ReasoningSplit(shape.style, shape.inside, (fmt.start, fmt.end) if fmt else None)
    pieces = split.feed(gen.text) + (split.finish() if final else [])
    msg.reasoning = "".join(p.text for p in pieces if p.kind == "reasoning")
    msg.content = "".join(p.text for p in pieces if p.kind == "content")
    tokens = getattr(gen.stream, "tokens", None)
    _clock(msg, gen, thinking=split.opened and not final)
    if final and msg.reasoning and tokens is not None and shape.end_token in tokens:
        msg.reasoning_tokens = list(tokens).index(shape.end_token) + 1


def _clock(msg: ChatMessage, gen: Any, *, thinking: bool) -> None:
    """How long and in how many tokens it has thought, while it thinks (and once, at the
    first frame with thinking, for a reply whose thinking came whole)."""
    now = time.monotonic()
    if gen.first_frame_at is None:
        gen.first_frame_at = now
    start = gen.first_frame_at
    if msg.reasoning and (thinking or msg.thinking_s is None):
        msg.thinking_s = now - start
        tokens = getattr(gen.stream, "tokens", None)
        msg.reasoning_tokens = len(tokens) if tokens is not None else None


def thinking_live(msg: ChatMessage) -> bool:
    """Whether the reply is still thinking (streaming, thinking and no answer yet)."""
    return msg.streaming and bool(msg.reasoning) and not msg.content
