"""A reasoning model's reply in a tab (issue #49): its stream's text split into the
thinking (`ChatMessage.reasoning`) and the answer (`content`) at each frame, with how long
and how many tokens it thought.

The split is engine.public's ReasoningSplit, kept on the Generation (`reply_split`) and
fed at each frame the text that came since the last, so the message holds the two parts
and no splitter state; a tag still arriving is held back until the reply ends. The
thinking's time and tokens are taken at the last frame that was still thinking (the local
engine's token count; a remote reply has none); at the end the tokens are counted exactly
where the thinking ends on a token of its own (Qwen3's `</think>`, gpt-oss's `<|end|>`):
those up to it."""

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
    split = getattr(gen, "reply_split", None)
    text = gen.text
    if split is None or len(text) < split.read:  # the first frame (or a text begun anew)
        fmt = getattr(gen, "call_format", None)  # calls that close the thinking: answer's
        split = gen.reply_split = ReplySplit(ReasoningSplit(
            shape.style, shape.inside, (fmt.start, fmt.end) if fmt else None))
    split.take(text, final)
    msg.reasoning, msg.content = split.reasoning, split.content
    tokens = getattr(gen.stream, "tokens", None)
    _clock(msg, gen, thinking=split.split.opened and not final)
    if final and msg.reasoning and tokens is not None and shape.end_token in tokens:
        msg.reasoning_tokens = list(tokens).index(shape.end_token) + 1


class ReplySplit:
    """A reply's splitter, fed at each frame the text that came since the last one (a
    Harmony reply is parsed by openai-harmony at some microseconds a token, so the whole
    text each frame would cost more the longer the reply), and the two parts so far."""

    def __init__(self, split: ReasoningSplit) -> None:
        self.split = split
        self.read = 0  # how much of the stream's text it has been fed
        self.reasoning = ""
        self.content = ""
        self.done = False

    def take(self, text: str, final: bool) -> None:
        if self.done:
            return
        pieces = self.split.feed(text[self.read:]) + (self.split.finish() if final else [])
        self.read, self.done = len(text), final
        self.reasoning += "".join(p.text for p in pieces if p.kind == "reasoning")
        self.content += "".join(p.text for p in pieces if p.kind == "content")


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
