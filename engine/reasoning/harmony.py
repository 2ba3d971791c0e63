"""gpt-oss's Harmony channels split from a reply as it streams, by openai-harmony's own
parser (its StreamableParser): the analysis channel is reasoning, final (and commentary to
no one, a preamble) the answer, a message addressed `to=functions.NAME` a tool call,
given out whole at its end.

The engine streams text, Harmony's markers included, so the text is encoded back into
the o200k_harmony tokens the parser reads; a marker still arriving is held back until it
is whole. Where openai-harmony's encoding cannot be loaded (its o200k_base vocabulary is
not at hand: harmony_vocab.py), harmony_markers.py reads the markers' text instead.

Two leniencies around the reference parser, which refuses both: a reply that does not
open as a header does (a marker, or `to=`) is all answer, and after a malformed message
the parse starts afresh (what follows is read as the next message's header), so a stray
token costs at most that message's header rather than the rest of the reply."""

from __future__ import annotations

import functools
import os
from typing import Any

from .harmony_vocab import ENV, vocabulary_dir
from .split import Piece, ReasoningSplit
from .style import ReasoningStyle

# how a reply's first header can open: a marker, or the recipient that openai-harmony's
# renderer writes beside the role ("<|start|>assistant to=functions.f<|channel|>…")
OPENINGS = ("<|", "to=")


@functools.cache
def harmony_encoding() -> Any | None:
    """openai-harmony's gpt-oss encoding, or None where it cannot be loaded (the package or
    the vocabulary is missing). Tried once a process, from local files only."""
    folder = vocabulary_dir()
    if folder is None:
        return None
    try:
        from openai_harmony import HarmonyEncodingName, load_harmony_encoding
    except ImportError:
        return None
    before = os.environ.get(ENV)
    os.environ[ENV] = str(folder)  # the one way the crate is told where the file is
    try:
        return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    except Exception:  # noqa: BLE001 - a file it refuses: the markers' road
        return None
    finally:
        if before is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = before


def split_class() -> type[ReasoningSplit]:
    """The splitter a Harmony reply gets: openai-harmony's parse, else the markers'."""
    if harmony_encoding() is not None:
        return HarmonySplit
    from .harmony_markers import HarmonyMarkerSplit

    return HarmonyMarkerSplit


@functools.cache
def _special_prefixes(enc: Any) -> frozenset[str]:
    """Every proper prefix of a special token's text: the tail of the text a stream may
    hold back (a marker split across deltas)."""
    return frozenset(s[:n] for s in enc.special_tokens_set for n in range(1, len(s)))


class HarmonySplit(ReasoningSplit):
    def __init__(self, style: ReasoningStyle | None, inside: bool = False,
                 calls: tuple[str, str] | None = None) -> None:
        # Harmony's calls are messages to=functions.NAME wherever they come (the analysis
        # channel too), so another format's call markers are not needed
        super().__init__(style, inside)
        from openai_harmony import Role

        self._enc = harmony_encoding()
        self._role = Role.ASSISTANT  # the prompt ends "<|start|>assistant": a header next
        self._parser = self._new_parser()
        self._mode = "start"  # "start": nothing read yet; "harmony"; "plain": no markers
        self._lead = False  # a message's text is kept as openai-harmony gives it
        self._body = False  # in a message's content (its header read)
        self._channel = ""
        self._to = ""  # the current message's function, where it is a call
        self._read = False  # a message's header has been read
        self._run: list[str] = []  # text of one kind not yet made a piece (joined once)
        self._run_kind = ""
        from openai_harmony import HarmonyError

        self._error = HarmonyError

    @property
    def thinking(self) -> bool:
        """In the analysis channel, or before the reply's first header is read."""
        if self._mode == "plain":
            return False
        return self._channel == "analysis" if self._body else not self._read

    @property
    def opened(self) -> bool:
        return self._body and self._channel == "analysis" and not self._to

    def _drain(self, final: bool) -> list[Piece]:
        out: list[Piece] = []
        if self._mode == "start":
            head = self._held.lstrip()
            if not head or (not final and any(m.startswith(head) for m in OPENINGS)):
                if final:
                    self._held = ""
                return out  # blank, or a header may be starting
            self._mode = "harmony" if head.startswith(OPENINGS) else "plain"
        if self._mode == "plain":
            self._add(out, "content", self._held)
            self._held = ""
            return out
        cut = len(self._held) if final else len(self._held) - self._kept()
        text, self._held = self._held[:cut], self._held[cut:]
        if text:
            for token in self._enc.encode(text, allowed_special="all"):
                self._take(out, token)
        if final:
            self._end(out)
        self._flush(out)
        return out

    def _kept(self) -> int:
        """How many characters at the held text's end may be a marker not yet whole."""
        tail = self._held[self._held.rfind("<"):]  # no marker holds a second "<"
        return len(tail) if tail in _special_prefixes(self._enc) else 0

    def _take(self, out: list[Piece], token: int) -> None:
        try:
            self._parser.process(token)
        except self._error:
            # a message the reference refuses (text where a header's <|start|> belongs,
            # say): read on from this token as a new message's header
            self._close(out)
            self._parser = self._new_parser()
            try:
                self._parser.process(token)
            except self._error:
                self._parser = self._new_parser()
                return
        delta = self._parser.last_content_delta
        if self._enc.is_special_token(token):
            self._follow(out)
        if delta and self._body:
            kind = "call" if self._to else \
                "reasoning" if self._channel == "analysis" else "content"
            if kind != self._run_kind:
                self._flush(out)
                self._run_kind = kind
            self._run.append(delta)

    def _flush(self, out: list[Piece]) -> None:
        """The run of text of one kind so far into a piece (a call's stays until its end:
        its arguments are given out whole)."""
        if self._run and self._run_kind != "call":
            self._add(out, self._run_kind, "".join(self._run))
            self._run = []

    def _follow(self, out: list[Piece]) -> None:
        """After a marker: into a message's content (its header read) or out of it."""
        from openai_harmony import StreamState

        body = self._parser.state == StreamState.CONTENT
        if body and not self._body:
            self._channel = self._parser.current_channel or ""
            to = self._parser.current_recipient or ""
            self._to = to.removeprefix("functions.") if to.startswith("functions.") else ""
            self._read = True
        elif self._body and not body:
            self._close(out)
        self._body = body

    def _close(self, out: list[Piece]) -> None:
        """The current message ended (or was cut short): its call, if it is one, whole."""
        self._flush(out)  # text before it goes out first
        if self._run_kind == "call":
            if self._to and self._body:
                out.append(Piece("call", "".join(self._run), self._to))
            self._run, self._run_kind = [], ""
        elif self._to and self._body:
            out.append(Piece("call", "", self._to))  # a call with no arguments
        self._to, self._body = "", False

    def _end(self, out: list[Piece]) -> None:
        try:
            self._parser.process_eos()
        except self._error:
            pass  # ended inside a header: nothing of it is text
        self._close(out)

    def _new_parser(self) -> Any:
        from openai_harmony import StreamableParser

        return StreamableParser(self._enc, self._role, strict=False)
