"""gpt-oss's Harmony channels split from a reply's text as it streams: the analysis
channel is reasoning, final the answer, commentary addressed `to=functions.NAME` a tool
call (commentary to no one is a preamble shown as answer).

The `openai-harmony` package is the reference: where its encoding can be loaded
(`harmony_encoding`), a whole reply's token ids are parsed by it (`parse_tokens`). Its
encoding needs the o200k_base vocabulary, which it downloads on first use (or reads from
TIKTOKEN_ENCODINGS_BASE); offline, and for models whose ids are not o200k's (the tests'
tiny models), the text of the same markers is parsed here instead, which is the road a
stream always takes (the engine streams text, the markers included)."""

from __future__ import annotations

import functools
import os
from typing import Any

from .split import Piece, ReasoningSplit
from .style import ReasoningStyle

MESSAGE, END, CALL, RETURN, START, CHANNEL = ("<|message|>", "<|end|>", "<|call|>",
                                              "<|return|>", "<|start|>", "<|channel|>")
BODY_ENDS = (END, CALL, RETURN)


class HarmonySplit(ReasoningSplit):
    def __init__(self, style: ReasoningStyle | None, inside: bool = False,
                 calls: tuple[str, str] | None = None) -> None:
        # Harmony's calls are messages addressed to=functions.NAME, read wherever they come
        # (in the analysis channel too), so another format's markers are not needed
        super().__init__(style, inside)
        self._state = "header"
        self._channel = ""
        self._to = ""
        self._call = ""  # a tool call's arguments so far (given out whole at its end)
        self._first = True  # no message header read yet

    @property
    def thinking(self) -> bool:
        """In the analysis channel, or before the reply's first header is read."""
        if self._state == "header":
            return self._first
        return self._channel == "analysis"

    @property
    def opened(self) -> bool:
        return self._state == "body" and self._channel == "analysis"

    def _drain(self, final: bool) -> list[Piece]:
        out: list[Piece] = []
        while True:
            if self._state == "header":
                at = self._held.find(MESSAGE)
                if at < 0:
                    head = self._held.lstrip()
                    if self._first and head and not "<|".startswith(head[:2]):
                        self._channel, self._state = "final", "body"  # plain text: answer
                        continue
                    if final:
                        self._held = ""
                    return out
                self._channel, self._to = _header(self._held[:at])
                self._first = False
                self._held, self._state, self._lead = self._held[at + len(MESSAGE):], \
                    "body", True
                continue
            ends = [(i, m) for m in BODY_ENDS if (i := self._held.find(m)) >= 0]
            if ends:
                at, mark = min(ends)
                self._body(out, self._held[:at], closing=True)
                rest = self._held[at + len(mark):]
                if rest.startswith(START):  # the next message: "<|start|>assistant…"
                    rest = rest[len(START):]
                self._held, self._state = rest, "header"
                continue
            keep = 0 if final else max(_kept(self._held, m) for m in BODY_ENDS)
            self._body(out, self._held[:len(self._held) - keep], closing=final)
            self._held = self._held[len(self._held) - keep:] if keep else ""
            return out

    def _body(self, out: list[Piece], text: str, closing: bool) -> None:
        if self._to:
            self._call += text
            if closing:
                out.append(Piece("call", self._call.strip(), self._to))
                self._call = ""
            return
        kind = "reasoning" if self._channel == "analysis" else "content"
        if kind == "content" and out and out[-1].kind == "reasoning":
            self._lead = True
        self._add(out, kind, text)


def _header(text: str) -> tuple[str, str]:
    """(channel, recipient function name or "") of a message header such as
    `assistant<|channel|>commentary to=functions.get_weather <|constrain|>json`."""
    channel, to = "", ""
    if CHANNEL in text:
        channel = text.split(CHANNEL, 1)[1].split("<|", 1)[0].split()[0:1]
        channel = channel[0] if channel else ""
    for word in text.replace("<|", " <|").split():
        if word.startswith("to="):
            to = word[3:].removeprefix("functions.")
    return channel, to


def _kept(text: str, mark: str) -> int:
    for n in range(min(len(mark) - 1, len(text)), 0, -1):
        if mark.startswith(text[-n:]):
            return n
    return 0


@functools.cache
def harmony_encoding() -> Any | None:
    """openai-harmony's gpt-oss encoding, or None where it cannot be loaded: its vocabulary
    file is not at hand (no network and no TIKTOKEN_ENCODINGS_BASE) or the package is
    missing. Tried once a process; only with the file present locally, never fetched in
    the middle of a request."""
    base = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
    if not base or not os.path.isfile(os.path.join(base, "o200k_base.tiktoken")):
        return None
    try:
        from openai_harmony import HarmonyEncodingName, load_harmony_encoding

        return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    except Exception:  # noqa: BLE001 - no encoding: the text road
        return None


def parse_tokens(tokens: list[int]) -> list[Piece] | None:
    """A whole reply's pieces parsed by openai-harmony from its token ids (o200k's: a real
    gpt-oss model's), or None where the encoding is not at hand or refuses them."""
    enc = harmony_encoding()
    if enc is None:
        return None
    from openai_harmony import Role

    try:
        messages = enc.parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)
    except Exception:  # noqa: BLE001 - not Harmony after all: the text road
        return None
    out = []
    for m in messages:
        text = "".join(c.text for c in m.content if hasattr(c, "text"))
        if m.recipient and m.recipient.startswith("functions."):
            out.append(Piece("call", text, m.recipient.removeprefix("functions.")))
        else:
            out.append(Piece("reasoning" if m.channel == "analysis" else "content", text))
    return out
