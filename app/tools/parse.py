"""Tool calls out of a reply's text, streamed or whole (the whole parse is the streamed one
run at once, so both give the same calls and content).

Text outside the format's markers is content; the text between them is given to the
format's parser when the call closes. A call that does not parse (cut short, not JSON, an
unknown function) is given back as content, markers and all: never an error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .calls import ToolCall
from .formats import CallFormat


@dataclass(frozen=True)
class StreamDelta:
    """One piece of a streamed reply: content text, or a call (its index among the reply's
    calls, the whole call: a streamer sends its id and name, then its arguments)."""

    content: str = ""
    call: ToolCall | None = None
    index: int = 0


@dataclass
class Parsed:
    content: str | None
    calls: list[ToolCall] = field(default_factory=list)


class CallStream:
    def __init__(self, fmt: CallFormat, tool_names: Sequence[str],
                 tools: Any = None) -> None:
        """`tool_names`: the functions offered (a call to another is not a call);
        `tools`: what the format's parser is given (the request's tools, OpenAI's shape)."""
        self.fmt = fmt
        self.names = set(tool_names)
        self.tools = tools
        self.calls: list[ToolCall] = []
        self._held = ""  # text not yet sent: a marker may be starting, or the call's text
        self._in_call = False
        self._space = ""  # whitespace held back: dropped between and after calls

    def feed(self, text: str) -> list[StreamDelta]:
        self._held += text
        out: list[StreamDelta] = []
        while True:
            if not self._in_call:
                at = self._held.find(self.fmt.start)
                if at < 0:  # send all but what may be a marker's beginning
                    keep = _partial_suffix(self._held, self.fmt.start)
                    self._content(self._held[:len(self._held) - keep], out)
                    self._held = self._held[len(self._held) - keep:]
                    return out
                self._content(self._held[:at], out)
                self._held = self._held[at:]
                self._in_call = True
            if not self.fmt.end:  # runs to the end of the reply
                return out
            at = self._held.find(self.fmt.end, len(self.fmt.start))
            if at < 0:
                return out
            whole = self._held[:at + len(self.fmt.end)]
            self._held = self._held[at + len(self.fmt.end):]
            self._in_call = False
            self._call(whole, whole[len(self.fmt.start):at], out)

    def finish(self) -> list[StreamDelta]:
        """The reply ended: what is still held (a call left open is parsed if the format
        has no end marker, else given back as content)."""
        out: list[StreamDelta] = []
        held, self._held = self._held, ""
        if self._in_call and not self.fmt.end:
            self._call(held, held[len(self.fmt.start):], out)
        else:
            self._content(held, out)
        if not self.calls and self._space:  # a reply of text keeps its last whitespace
            out.append(StreamDelta(self._space))
        self._space = ""
        self._in_call = False
        return out

    def _content(self, text: str, out: list[StreamDelta]) -> None:
        if not text:
            return
        if not text.strip():
            self._space += text
            return
        stripped = text.rstrip()
        out.append(StreamDelta(self._space + stripped))
        self._space = text[len(stripped):]

    def _call(self, whole: str, inner: str, out: list[StreamDelta]) -> None:
        calls = self._parse(inner)
        if calls is None:
            self._content(whole, out)
            return
        self._space = ""
        for call in calls:
            out.append(StreamDelta(call=call, index=len(self.calls)))
            self.calls.append(call)

    def _parse(self, inner: str) -> list[ToolCall] | None:
        try:
            parsed = self.fmt.parse(inner, self.tools)
        except Exception:  # a parser's own error on text it cannot read (cut short, say)
            return None
        items = parsed if isinstance(parsed, list) else [parsed]
        calls = []
        for item in items:
            if not isinstance(item, dict) or item.get("name") not in self.names:
                return None
            args = item.get("arguments", {})
            if isinstance(args, str):
                import json
                try:
                    args = json.loads(args)
                except ValueError:
                    return None
            if not isinstance(args, dict):
                return None
            calls.append(ToolCall.of(item["name"], args, item.get("id")
                                     if isinstance(item.get("id"), str) else None))
        return calls or None


def parse_reply(text: str, fmt: CallFormat, tool_names: Sequence[str],
                tools: Any = None) -> Parsed:
    """A whole reply: its content (None if only calls) and its calls."""
    stream = CallStream(fmt, tool_names, tools)
    deltas = stream.feed(text) + stream.finish()
    content = "".join(d.content for d in deltas)
    return Parsed(content if content or not stream.calls else None, stream.calls)


def _partial_suffix(text: str, marker: str) -> int:
    """The length of the longest end of `text` that begins `marker`."""
    for n in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0
