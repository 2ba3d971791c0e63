"""OpenAI response bodies and SSE chunks, built from the engine's token events."""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..tools import CallStream, StreamDelta, parse_reply

if TYPE_CHECKING:
    from engine.public import EventStream, Piece, RequestStats, TokenEvent

    from ..request.overflow import Dropped
    from ..request.reasoning import Shape

TokenText = Callable[[int], str]  # a token id's own text

# The engine's finish reasons in OpenAI's words; cancelled / shutdown / error pass through
FINISH = {"stop": "stop", "length": "length", "context": "length"}
LOGPROB_FLOOR = -9999.0  # vLLM's stand-in for a logprob of minus infinity


def finish_reason(reason: str) -> str:
    return FINISH.get(reason, reason)


def json_logprob(value: float) -> float:
    """A logprob JSON can carry: -inf (a token ruled out, e.g. by an extreme repetition
    penalty) and NaN are not JSON numbers (json.dumps would write -Infinity / NaN, which
    strict parsers refuse), so they are sent as LOGPROB_FLOOR, as vLLM does; so is a finite
    value below it (a repetition penalty near 0 gives -1e16: the documented minimum holds)."""
    return value if math.isfinite(value) and value > LOGPROB_FLOOR else LOGPROB_FLOOR


def sse(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def usage(stats: Sequence[RequestStats | None], reasoning: int = 0,
          dropped: Dropped | None = None) -> dict[str, Any]:
    """One request's usage over its choices' engine stats: the prompt counted once (every
    choice reads the same one; its cached tokens are the first choice's, which read it),
    the completion tokens of every choice. A choice without stats (cut short by another's
    failure) counts nothing. Speculative decoding's drafts are OpenAI's prediction tokens
    (the server's own predictions here): accepted ones are part of the completion, rejected
    ones are not, and neither costs anything. `reasoning`: the completion tokens a
    reasoning model spent thinking (its tags or Harmony headers included). `dropped`: what
    the context overflow policy left out of the prompt, as prompt_tokens_details'
    `dropped_tokens` and `dropped_messages` (only when it dropped something)."""
    first = next((s for s in stats if s is not None), None)
    prompt = first.prompt_tokens if first else 0
    cached = first.cached_tokens if first else 0
    done = sum(s.generated_tokens for s in stats if s is not None)
    drafted = sum(s.drafted_tokens for s in stats if s is not None)
    accepted = sum(s.accepted_tokens for s in stats if s is not None)
    details: dict[str, int] = {"cached_tokens": cached}
    if dropped:
        details |= {"dropped_tokens": dropped.tokens, "dropped_messages": dropped.messages}
    return {"prompt_tokens": prompt, "completion_tokens": done,
            "total_tokens": prompt + done,
            "prompt_tokens_details": details,
            "completion_tokens_details": {"accepted_prediction_tokens": accepted,
                                          "rejected_prediction_tokens": drafted - accepted,
                                          "reasoning_tokens": reasoning}}


def full(replies: Sequence[Reply], streams: Sequence[EventStream]) -> dict[str, Any]:
    """The whole response of a request's choices (each ended): each choice's text is its
    stream's (the one copy of a reply's text; a Reply keeps none)."""
    first = replies[0]
    choices = [r.choice(r.ended or "stop", s.text)
               for r, s in zip(replies, streams, strict=True)]
    whole = first.envelope(first.object, choices) | {"usage": usage(
        [s.stats for s in streams], sum(r.reasoning_tokens for r in replies), first.dropped)}
    if first.citations:
        whole["citations"] = citations_json(first.citations)
    return whole


def citations_json(citations: Sequence[Any]) -> list[dict[str, Any]]:
    """The retrieved passages a reply was given (app/attachments/fit.py Citation), as the
    `citations` field lists them: `index` is the [n] the prompt numbered them by."""
    return [{"index": c.n, "file": c.file, "source": c.source, "page": c.page,
             "first_line": c.first_line, "last_line": c.last_line, "text": c.text}
            for c in citations]


@dataclass
class Reply:
    """One choice of a request's response under construction: ids, and the logprobs so far.
    A request's choices share `id` and `created`. Its text is its stream's, never kept here
    (chunks carry each event's text; `choice` is handed the whole)."""

    kind: str  # "chat" | "completion"
    model: str
    token_text: TokenText
    top: int | None  # logprobs alternatives asked for, None = no logprobs
    index: int = 0  # the choice's index (n > 1)
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))
    entries: list[tuple[str, float, list[tuple[str, float]]]] = field(default_factory=list)
    token_chars: int = 0  # text offset of the next token (legacy completions logprobs)
    ended: str | None = None  # the engine's finish reason, once the last event is taken
    calls: CallStream | None = None  # tools offered: the reply's calls, parsed as they come
    # a reasoning model's reply (app/request/reasoning.py): its text split into
    # `reasoning_content` / `reasoning` and content as it comes
    shape: Shape | None = None
    reasoning_tokens: int = 0  # tokens that opened, continued or closed the thinking
    split: Any = None  # engine.public.ReasoningSplit, made from `shape`
    pieces: list[Piece] = field(default_factory=list)  # split, not yet sent
    harmony_calls: int = 0  # Harmony tool calls sent so far (their indexes)
    dropped: Dropped | None = None  # what the context overflow policy left out of the prompt
    # the passages of attached files that did not fit whole (#51), as `citations` says them
    citations: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        prefix = "chatcmpl" if self.kind == "chat" else "cmpl"
        self.id = self.id or f"{prefix}-{uuid.uuid4().hex}"
        if self.shape is not None and self.kind == "chat":
            from engine.public import ReasoningSplit

            self.split = ReasoningSplit(self.shape.style, self.shape.inside,
                                        _markers(self.calls))

    @property
    def object(self) -> str:
        return "chat.completion" if self.kind == "chat" else "text_completion"

    def add(self, event: TokenEvent) -> dict[str, Any] | None:
        """Take one event; its logprobs in the response's shape (None without)."""
        if self.split is not None:
            was = self.split.opened  # a token that opens, continues or closes the thinking
            self.pieces += self.split.feed(event.text)
            if event.token is not None and (was or self.split.opened):
                self.reasoning_tokens += 1
            if event.finish_reason is not None:
                self.pieces += self.split.finish()
        if event.finish_reason is not None:
            self.ended = event.finish_reason
        if self.top is None or event.token is None or event.logprob is None:
            return None
        entry = (self.token_text(event.token), json_logprob(event.logprob),
                 [(self.token_text(t), json_logprob(lp)) for t, lp in event.top_logprobs or ()])
        self.entries.append(entry)
        out = self._logprobs([entry], self.token_chars)
        self.token_chars += len(entry[0])
        return out

    # -- whole responses ------------------------------------------------------------------
    def choice(self, reason: str, text: str) -> dict[str, Any]:
        """This choice in a whole response, its text `text` (its stream's, split as the
        stream was: a Harmony reply by openai-harmony's parser)."""
        logprobs = self._logprobs(self.entries, 0) if self.top is not None else None
        thought: dict[str, Any] = {}
        harmony: list[dict[str, Any]] = []
        if self.split is not None and self.shape is not None:
            from engine.public import split_whole

            reasoning, text, found = split_whole(text, self.shape.style, self.shape.inside,
                                                 _markers(self.calls))
            thought = {"reasoning_content": reasoning, "reasoning": reasoning}
            harmony = [_call(p) for p in found]
        if self.kind == "chat" and (self.calls is not None or harmony):
            message: dict[str, Any] = {"role": "assistant", "content": text} | thought
            calls = harmony
            if self.calls is not None:
                c = self.calls
                parsed = parse_reply(text, c.fmt, sorted(c.names), c.tools)
                message["content"] = parsed.content
                calls = calls + [call.openai() for call in parsed.calls]
            if calls:
                message["tool_calls"] = calls
            return {"index": self.index, "message": message, "logprobs": logprobs,
                    "finish_reason": self._reason(reason, bool(calls))}
        if self.kind == "chat":
            return {"index": self.index,
                    "message": {"role": "assistant", "content": text} | thought,
                    "logprobs": logprobs, "finish_reason": finish_reason(reason)}
        return {"index": self.index, "text": text, "logprobs": logprobs,
                "finish_reason": finish_reason(reason)}

    # -- stream chunks --------------------------------------------------------------------
    def first_chunk(self) -> dict[str, Any] | None:
        """Chat streams open with the assistant role, as OpenAI's do."""
        if self.kind != "chat":
            return None
        return self._chunk({"role": "assistant", "content": ""}, None, None)

    def chunk(self, text: str, logprobs: dict[str, Any] | None,
              reason: str | None) -> dict[str, Any]:
        delta = {"content": text} if text else {}
        return self._chunk(delta, logprobs, None if reason is None else finish_reason(reason))

    def chunks(self, text: str, logprobs: dict[str, Any] | None,
               reason: str | None) -> list[dict[str, Any]]:
        """The chunks one event makes: with tools, content and tool_calls deltas (a call:
        its id and name, then its arguments), the logprobs on the first; none if nothing
        is to be sent yet (a marker may be starting). A reasoning model's event sends the
        pieces `add` split from its text: thinking as `reasoning_content` and `reasoning`
        deltas, the answer as above, Harmony's calls as tool_calls."""
        if self.split is not None:
            return self._split_chunks(logprobs, reason)
        if self.calls is None:
            if not (text or logprobs is not None or reason is not None):
                return []
            return [self.chunk(text, logprobs, reason)]
        deltas = self.calls.feed(text)
        if reason is not None:
            deltas += self.calls.finish()
        out = []
        for d in deltas:
            for delta in _deltas(d):
                out.append(self._chunk(delta, logprobs, None))
                logprobs = None
        if logprobs is not None or reason is not None:
            out.append(self._chunk({}, logprobs, None if reason is None else
                                   self._reason(reason, bool(self.calls.calls))))
        return out

    def _split_chunks(self, logprobs: dict[str, Any] | None,
                      reason: str | None) -> list[dict[str, Any]]:
        pieces, self.pieces = self.pieces, []
        deltas: list[dict[str, Any]] = []
        for p in pieces:
            if p.kind == "reasoning":
                deltas.append({"reasoning_content": p.text, "reasoning": p.text})
            elif p.kind == "call":
                call = _call(p)
                deltas += [{"tool_calls": [{"index": self.harmony_calls, "id": call["id"],
                                            "type": "function", "function": {
                                                "name": p.name, "arguments": ""}}]},
                           {"tool_calls": [{"index": self.harmony_calls, "function": {
                               "arguments": p.text}}]}]
                self.harmony_calls += 1
            elif self.calls is not None:
                deltas += [x for d in self.calls.feed(p.text) for x in _deltas(d)]
            else:
                deltas.append({"content": p.text})
        if reason is not None and self.calls is not None:
            deltas += [x for d in self.calls.finish() for x in _deltas(d)]
        out = []
        for delta in deltas:
            out.append(self._chunk(delta, logprobs, None))
            logprobs = None
        if logprobs is not None or reason is not None:
            called = self.harmony_calls > 0 or bool(self.calls and self.calls.calls)
            out.append(self._chunk({}, logprobs, None if reason is None else
                                   self._reason(reason, called)))
        return out

    def _reason(self, reason: str, called: bool) -> str:
        return "tool_calls" if called and reason == "stop" else finish_reason(reason)

    def usage_chunk(self, stats: Sequence[RequestStats | None],
                    reasoning: int = 0) -> dict[str, Any]:
        """The last chunk with include_usage: no choice, the request's usage."""
        return self.envelope(self._chunk_object, []) | {"usage": usage(stats, reasoning,
                                                                        self.dropped)}

    # -- internals ------------------------------------------------------------------------
    @property
    def _chunk_object(self) -> str:
        return "chat.completion.chunk" if self.kind == "chat" else "text_completion"

    def _chunk(self, delta: dict[str, Any], logprobs: dict[str, Any] | None,
               reason: str | None) -> dict[str, Any]:
        if self.kind == "chat":
            choice = {"index": self.index, "delta": delta, "logprobs": logprobs,
                      "finish_reason": reason}
        else:
            choice = {"index": self.index, "text": delta.get("content", ""),
                      "logprobs": logprobs, "finish_reason": reason}
        out = self.envelope(self._chunk_object, [choice])
        if reason is not None and self.citations:  # streamed: once, with the choice's end
            out["citations"] = citations_json(self.citations)
        return out

    def envelope(self, obj: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "choices": choices}

    def _logprobs(self, entries: list[tuple[str, float, list[tuple[str, float]]]],
                  offset: int) -> dict[str, Any]:
        if self.kind == "chat":
            return {"content": [
                {"token": tok, "logprob": lp, "bytes": list(tok.encode()),
                 "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())}
                                  for t, v in top]}
                for tok, lp, top in entries]}
        # the legacy completions shape
        offsets, at = [], offset
        for tok, _, _ in entries:
            offsets.append(at)
            at += len(tok)
        return {"tokens": [tok for tok, _, _ in entries],
                "token_logprobs": [lp for _, lp, _ in entries],
                "top_logprobs": [dict(top) for _, _, top in entries] if self.top else None,
                "text_offset": offsets}


def _markers(calls: CallStream | None) -> tuple[str, str] | None:
    """The (start, end) markers of the reply's call format: calls that close the thinking
    are the answer's (engine.public.ReasoningSplit)."""
    return None if calls is None else (calls.fmt.start, calls.fmt.end)


def _call(piece: Piece) -> dict[str, Any]:
    """A Harmony tool call in OpenAI's shape."""
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": piece.name, "arguments": piece.text}}


def _deltas(d: StreamDelta) -> list[dict[str, Any]]:
    if d.call is None:
        return [{"content": d.content}]
    return [{"tool_calls": [{"index": d.index, "id": d.call.id, "type": "function",
                             "function": {"name": d.call.name, "arguments": ""}}]},
            {"tool_calls": [{"index": d.index, "function": {"arguments": d.call.arguments}}]}]
