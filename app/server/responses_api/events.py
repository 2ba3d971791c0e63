"""A streamed response in the Responses API's event sequence: response.created and
response.in_progress; for each output item response.output_item.added, its parts and deltas
(reasoning_text, output_text with content_part.added / .done, function_call_arguments) and
response.output_item.done; then response.completed (or response.incomplete at
max_output_tokens). Every event carries its sequence_number. Written from the chat route's
chunk deltas (responses.Reply.chunks), so a stream says what the whole response says."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from . import output
from .output import Envelope


class Events:
    """The events of one response; each method returns those to write next (SSE bytes).
    `items` are the output items as they stand (the whole response's at the end)."""

    def __init__(self, envelope: Envelope) -> None:
        self.envelope = envelope
        self.items: list[dict[str, Any]] = []
        self._seq = 0
        self._open: str | None = None  # the kind of the last item, while open

    def start(self) -> list[bytes]:
        shell = self.envelope.response("in_progress", [])
        return [self._event("response.created", response=shell),
                self._event("response.in_progress", response=shell)]

    def delta(self, delta: Mapping[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        if delta.get("reasoning_content"):
            out += self._item("reasoning")
            item = self.items[-1]
            item["content"][0]["text"] += delta["reasoning_content"]
            out.append(self._event("response.reasoning_text.delta", **self._at(),
                                   content_index=0, delta=delta["reasoning_content"]))
        if delta.get("content"):
            out += self._item("message")
            self.items[-1]["content"][0]["text"] += delta["content"]
            out.append(self._event("response.output_text.delta", **self._at(),
                                   content_index=0, delta=delta["content"], logprobs=[]))
        for call in delta.get("tool_calls") or ():
            fn = call.get("function") or {}
            if call.get("id"):  # a new call: an item of its own
                out += self._close()
                self.items.append(output.call_item(output.new_id("fc"), call["id"],
                                                   fn.get("name") or "", "", "in_progress"))
                self._open = "function_call"
                out.append(self._added())
            if fn.get("arguments"):
                self.items[-1]["arguments"] += fn["arguments"]
                out.append(self._event("response.function_call_arguments.delta",
                                       **self._at(), delta=fn["arguments"]))
        return out

    def finish(self, usage: dict[str, Any], finish: str) -> tuple[list[bytes], dict[str, Any]]:
        """The last item closed and response.completed (or .incomplete); the response."""
        out = self._close()
        response = self.envelope.response("completed", self.items, usage, finish)
        kind = "response.incomplete" if response["status"] == "incomplete" \
            else "response.completed"
        return out + [self._event(kind, response=response)], response

    def failed(self, message: str) -> bytes:
        """A failure after the stream began (the engine failed, the server is stopping)."""
        response = self.envelope.response("failed", self.items)
        response["error"] = {"code": "server_error", "message": message}
        return self._event("response.failed", response=response)

    # -- items ------------------------------------------------------------------------------
    def _item(self, kind: str) -> list[bytes]:
        """Open an item of `kind` unless one is open (closing another kind's first)."""
        if self._open == kind:
            return []
        out = self._close()
        if kind == "reasoning":
            item = output.reasoning_item(output.new_id("rs"), "")
            item["status"] = "in_progress"
        else:
            item = output.message_item(output.new_id("msg"), "", "in_progress")
        self.items.append(item)
        self._open = kind
        out.append(self._added())
        if kind == "message":
            out.append(self._event("response.content_part.added", **self._at(),
                                   content_index=0, part=output.text_part("")))
        return out

    def _added(self) -> bytes:
        item = json.loads(json.dumps(self.items[-1]))  # as it is now, not as it will be
        if item["type"] == "message":
            item["content"] = []
        return self._event("response.output_item.added", output_index=len(self.items) - 1,
                           item=item)

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        item, at, out = self.items[-1], self._at(), []
        item["status"] = "completed"
        if self._open == "reasoning":
            out.append(self._event("response.reasoning_text.done", **at, content_index=0,
                                   text=item["content"][0]["text"]))
        elif self._open == "message":
            part = item["content"][0]
            out.append(self._event("response.output_text.done", **at, content_index=0,
                                   text=part["text"], logprobs=[]))
            out.append(self._event("response.content_part.done", **at, content_index=0,
                                   part=part))
        else:
            out.append(self._event("response.function_call_arguments.done", **at,
                                   name=item["name"], arguments=item["arguments"]))
        out.append(self._event("response.output_item.done", output_index=at["output_index"],
                               item=item))
        self._open = None
        return out

    def _at(self) -> dict[str, Any]:
        return {"item_id": self.items[-1]["id"], "output_index": len(self.items) - 1}

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        text = json.dumps(data, separators=(",", ":"))
        return f"event: {kind}\ndata: {text}\n\n".encode()


def error_event(code: str, message: str, param: str | None) -> bytes:
    """The Responses API's `error` event: a refusal after the stream began but before the
    response existed (its model loaded, then the request was refused: load_stream.py). The
    first and only event, so its sequence_number is 0; the `openai` client yields it as a
    ResponseErrorEvent, as it does OpenAI's own."""
    data = {"type": "error", "sequence_number": 0, "code": code, "message": message,
            "param": param}
    return f"event: error\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
