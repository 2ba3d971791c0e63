"""A streamed reply in Anthropic's event sequence: message_start, ping, then for each
content block content_block_start, its deltas (thinking_delta and a signature_delta,
text_delta, input_json_delta) and content_block_stop, then message_delta (stop reason,
stop sequence, usage) and message_stop. Written from the OpenAI route's chunk deltas
(responses.Reply.chunks), so a stream says what the whole reply says."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .message import SIGNATURE


def event(data: Mapping[str, Any]) -> bytes:
    """One server-sent event, named by its type as Anthropic's are."""
    text = json.dumps(data, separators=(",", ":"))
    return f"event: {data['type']}\ndata: {text}\n\n".encode()


class Events:
    """The events of one reply; each method returns those to write next."""

    def __init__(self, msg_id: str, model: str) -> None:
        self.msg_id = msg_id
        self.model = model
        self._index = -1  # the open block's index
        self._open: str | None = None  # its type

    def start(self, input_tokens: int) -> list[bytes]:
        """message_start (the prompt's tokens; how many came from the prefix cache is
        known at the end, in message_delta) and a ping."""
        message = {"id": self.msg_id, "type": "message", "role": "assistant",
                   "model": self.model, "content": [], "stop_reason": None,
                   "stop_sequence": None,
                   "usage": {"input_tokens": input_tokens, "output_tokens": 0}}
        return [event({"type": "message_start", "message": message}),
                event({"type": "ping"})]

    def delta(self, delta: Mapping[str, Any]) -> list[bytes]:
        """The events of one OpenAI chunk delta: reasoning, content or a tool call's
        start (id and name) or arguments."""
        out: list[bytes] = []
        if delta.get("reasoning_content"):
            out += self._block("thinking", {"thinking": "", "signature": ""})
            out.append(self._delta({"type": "thinking_delta",
                                    "thinking": delta["reasoning_content"]}))
        if delta.get("content"):
            out += self._block("text", {"text": ""})
            out.append(self._delta({"type": "text_delta", "text": delta["content"]}))
        for call in delta.get("tool_calls") or ():
            fn = call.get("function") or {}
            if call.get("id"):  # a new call: a block of its own
                out += self._close()
                out += self._block("tool_use", {"id": call["id"], "name": fn.get("name"),
                                                "input": {}})
            if fn.get("arguments"):
                out.append(self._delta({"type": "input_json_delta",
                                        "partial_json": fn["arguments"]}))
        return out

    def finish(self, reason: str, matched: str | None,
               usage: Mapping[str, int]) -> list[bytes]:
        """The last block closed, message_delta with the stop reason and the usage (the
        input tokens as message.usage counts them), message_stop."""
        return self._close() + [
            event({"type": "message_delta",
                   "delta": {"stop_reason": reason, "stop_sequence": matched},
                   "usage": dict(usage)}),
            event({"type": "message_stop"})]

    @staticmethod
    def error(kind: str, message: str) -> bytes:
        """A failure after the stream began (the engine failed, the server is stopping)."""
        return event({"type": "error", "error": {"type": kind, "message": message}})

    # -- blocks -----------------------------------------------------------------------------
    def _block(self, kind: str, fields: dict[str, Any]) -> list[bytes]:
        """Open a block of `kind` unless one is open (closing another kind's first)."""
        if self._open == kind and kind != "tool_use":
            return []
        out = self._close()
        self._index += 1
        self._open = kind
        out.append(event({"type": "content_block_start", "index": self._index,
                          "content_block": {"type": kind, **fields}}))
        return out

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return event({"type": "content_block_delta", "index": self._index, "delta": delta})

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        out = []
        if self._open == "thinking":  # Anthropic's thinking blocks end with their signature
            out.append(self._delta({"type": "signature_delta", "signature": SIGNATURE}))
        out.append(event({"type": "content_block_stop", "index": self._index}))
        self._open = None
        return out
