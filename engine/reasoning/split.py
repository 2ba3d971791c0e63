"""A reply's text split into reasoning and answer as it streams: think tags here, Harmony
channels in harmony.py (openai-harmony's parser; harmony_markers.py where it cannot
load). A tag split across deltas is held back until it can be told apart from text
(nothing of a tag ever reaches either side), and the whole text split at once gives the
same pieces as the deltas (`split_whole`)."""

from __future__ import annotations

from dataclasses import dataclass

from .style import ReasoningStyle


@dataclass(frozen=True, slots=True)
class Piece:
    """`kind`: "reasoning", "content", or "call" (a Harmony tool call: `name` and its
    arguments as `text`, whole)."""

    kind: str
    text: str
    name: str = ""


class ReasoningSplit:
    """Streaming splitter for one reply. `inside`: the prompt opened the thinking (the
    reply starts in it); otherwise a reply may open with the start tag (after blank
    space), and one that does not is all answer.

    `calls`: the (start, end) markers of the reply's tool-call format where tools were
    offered. Calls that close the thinking (nothing but blank space between them and the
    end tag, or the reply's end: Qwen3.6 acting before its `</think>`, LM Studio #1870)
    are given to the answer, where the call parser reads them; a call followed by more
    thinking is a rehearsal and stays in the thinking (LM Studio #1592, #453). Until
    that is known the call's text is held back."""

    def __new__(cls, style: ReasoningStyle | None, inside: bool = False,
                calls: tuple[str, str] | None = None) -> ReasoningSplit:
        if cls is ReasoningSplit and style is not None and style.harmony:
            from .harmony import split_class

            return super().__new__(split_class())
        return super().__new__(cls)

    def __init__(self, style: ReasoningStyle | None, inside: bool = False,
                 calls: tuple[str, str] | None = None) -> None:
        self.style = style
        self.calls = calls if calls and calls[0] else None
        self._state = "answer" if style is None else ("inside" if inside else "before")
        self._held = ""  # text not yet given out: a tag may be starting in it
        # the section's leading blank space is still being dropped (a thinking section and
        # the answer after it; a reply that never thinks keeps its first space)
        self._lead = self._state == "inside"
        self.reasoning_chars = 0

    @property
    def thinking(self) -> bool:
        """Whether the reply is in its thinking now (or may be about to open it)."""
        return self._state in ("before", "inside", "call")

    @property
    def opened(self) -> bool:
        """Inside the thinking for sure (its start read, its end not yet; a call written
        in it counts as thinking while it is held)."""
        return self._state in ("inside", "call")

    def feed(self, text: str) -> list[Piece]:
        self._held += text
        return self._drain(final=False)

    def finish(self) -> list[Piece]:
        return self._drain(final=True)

    def _drain(self, final: bool) -> list[Piece]:
        out: list[Piece] = []
        while True:
            if self._state == "before":
                body = self._held.lstrip()
                start = self.style.start if self.style else ""
                if body.startswith(start):
                    self._held, self._state, self._lead = body[len(start):], "inside", True
                    continue
                if body and not final and start.startswith(body) or not body and not final:
                    return out  # could still be the start tag
                self._state, self._lead = "answer", False
                continue
            if self._state == "call":
                if not self._take_calls(out, final):
                    return out
                continue
            if self._state == "inside":
                end = self.style.end if self.style else ""
                at = self._held.find(end)
                call = self._held.find(self.calls[0]) if self.calls else -1
                if call >= 0 and (at < 0 or call < at):
                    # a call inside the thinking: held until what follows it says which
                    text = self._held[:call].rstrip()
                    self._add(out, "reasoning", text)
                    self._held, self._state = self._held[len(text):], "call"
                    continue
                if at >= 0:
                    self._add(out, "reasoning", self._held[:at].rstrip())
                    self._held, self._state, self._lead = self._held[at + len(end):], \
                        "answer", True
                    continue
                keep = len(self._held) if final else max(
                    _tail_kept(self._held, end),
                    _tail_kept(self._held, self.calls[0]) if self.calls else 0)
                text = self._held[:len(self._held) - keep] if keep else self._held
                if final:
                    text, keep = self._held.rstrip(), 0
                else:  # blank space before a closing tag is not the reasoning's
                    stripped = text.rstrip()
                    keep += len(text) - len(stripped)
                    text = stripped
                self._add(out, "reasoning", text)
                self._held = self._held[len(self._held) - keep:] if keep else ""
                return out
            self._add(out, "content", self._held)
            self._held = ""
            return out

    def _take_calls(self, out: list[Piece], final: bool) -> bool:
        """In the "call" state: the held text (blank space, then calls) given to the answer
        if the thinking ends after the calls, to the thinking if it goes on; False while
        it cannot be told yet."""
        assert self.calls is not None and self.style is not None
        (start, close), end, held = self.calls, self.style.end, self._held
        first = len(held) - len(held.lstrip())  # the first call's marker
        at, done = first, 0  # where the reading is; the end of the last whole call
        while True:
            at = len(held) - len(held[at:].lstrip())
            rest = held[at:]
            if rest.startswith(start):
                stop = held.find(close or end, at + len(start))
                if stop < 0 or (close and 0 <= held.find(end, at) < stop):
                    if not final and stop < 0 and held.find(end, at) < 0:
                        return False  # the call is not whole yet
                    if close or stop >= 0:
                        break  # cut short by the end of the thinking or of the reply
                    stop = len(held)  # a call without an end marker runs to the end
                at = done = stop + (len(close) if close else 0)
                continue
            if rest.startswith(end) or (final and not rest):
                self._add(out, "content", held[:at].strip())
                self._held, self._state, self._lead = held[at + len(end):] if rest else "", \
                    "answer", True
                return True
            if not final and (start.startswith(rest) or end.startswith(rest)):
                return False  # a marker may be starting
            break
        # a rehearsal: the text stays thinking, read on past the call (or its marker)
        upto = done or first + len(start)
        self._add(out, "reasoning", held[:upto])
        self._held, self._state = held[upto:], "inside"
        return True

    def _add(self, out: list[Piece], kind: str, text: str) -> None:
        if self._lead:
            text = text.lstrip()
            if not text:
                return
            self._lead = False
        if not text:
            return
        if kind == "reasoning":
            self.reasoning_chars += len(text)
        if out and out[-1].kind == kind and kind != "call":
            out[-1] = Piece(kind, out[-1].text + text)
        else:
            out.append(Piece(kind, text))


def _tail_kept(text: str, tag: str) -> int:
    """How many characters at the end of `text` could be the start of `tag`."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


def split_whole(text: str, style: ReasoningStyle | None, inside: bool = False,
                calls: tuple[str, str] | None = None) -> tuple[str, str, list[Piece]]:
    """(reasoning, answer, calls) of a whole reply: the streaming splitter fed at once."""
    split = ReasoningSplit(style, inside, calls)
    pieces = split.feed(text) + split.finish()
    return ("".join(p.text for p in pieces if p.kind == "reasoning"),
            "".join(p.text for p in pieces if p.kind == "content"),
            [p for p in pieces if p.kind == "call"])
