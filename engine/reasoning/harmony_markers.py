"""The fallback for gpt-oss's Harmony channels where openai-harmony's encoding cannot be
loaded (harmony.py is the real parse): the markers' text read here. The analysis channel
is reasoning, final the answer, a message addressed `to=functions.NAME` a tool call
(commentary to no one is a preamble shown as answer). Its pieces are openai-harmony's:
a message's text as written (blank space kept), a message to a built-in tool (python,
browser.*) read by its channel."""

from __future__ import annotations

from .harmony import OPENINGS
from .split import Piece, ReasoningSplit
from .style import ReasoningStyle

MESSAGE, END, CALL, RETURN, START, CHANNEL = ("<|message|>", "<|end|>", "<|call|>",
                                              "<|return|>", "<|start|>", "<|channel|>")
BODY_ENDS = (END, CALL, RETURN)


class HarmonyMarkerSplit(ReasoningSplit):
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
                    if self._first and head and not any(
                            head.startswith(m) or m.startswith(head) for m in OPENINGS):
                        self._channel, self._state = "final", "body"  # plain text: answer
                        continue
                    if final:
                        self._held = ""
                    return out
                self._channel, self._to = _header(self._held[:at])
                self._first = False
                self._held, self._state = self._held[at + len(MESSAGE):], "body"
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
                out.append(Piece("call", self._call, self._to))
                self._call = ""
            return
        self._add(out, "reasoning" if self._channel == "analysis" else "content", text)


def _header(text: str) -> tuple[str, str]:
    """(channel, recipient function name or "") of a message header such as
    `assistant<|channel|>commentary to=functions.get_weather <|constrain|>json`."""
    channel, to = "", ""
    if CHANNEL in text:
        channel = text.split(CHANNEL, 1)[1].split("<|", 1)[0].split()[0:1]
        channel = channel[0] if channel else ""
    for word in text.replace("<|", " <|").split():
        if word.startswith("to="):
            to = word[3:].removeprefix("functions.") if word.startswith("to=functions.") \
                else ""
    return channel, to


def _kept(text: str, mark: str) -> int:
    for n in range(min(len(mark) - 1, len(text)), 0, -1):
        if mark.startswith(text[-n:]):
            return n
    return 0
