"""Tool-call turns: a reply that called tools waits for each call's outcome, then the chat
goes on with the results (Qt-free).

The Conversation hands a finished reply here (`take_calls`); if it called tools, the reply's
text becomes the text shown without the calls, and each call waits for its outcome, which
app.tool_runner (the MCP servers) or the user's Deny sets with `set_result`. When every
call has one, `resume` starts the next reply below it, whose prompt holds the calls and
their results (Conversation.prompt_messages). Stop refuses the calls not answered yet.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .bridge import Generation
from .events import Event
from .message_tree import ChatMessage
from .reply_tools import reply_calls

ENDED = ("done", "failed", "denied")  # a call's outcomes that need nothing more


class ToolTurns:
    """One chat's tool-call turns. `offered`: the tools offered with the next send (OpenAI's
    shape; app.tool_runner fills it when the chat's settings name MCP servers); `waiting`:
    replies whose calls await outcomes, by message id.

    Events: `calls_found(msg)` (a reply called tools; each call's outcome is pending) and
    `stopped()` (Stop: the calls not answered yet are denied, and no reply follows)."""

    def __init__(self, changed: Callable[[ChatMessage], object],
                 resume: Callable[[ChatMessage], object]) -> None:
        """`changed(msg)`: a call's outcome changed; `resume(msg)`: every call of `msg` has
        its outcome, so the next reply answers them."""
        self._changed = changed
        self._resume = resume
        self.offered: list[dict[str, Any]] = []
        self.waiting: dict[str, ChatMessage] = {}
        self.calls_found = Event()
        self.stopped = Event()

    def take_calls(self, msg: ChatMessage, gen: Generation) -> bool:
        """`msg` (a reply) ended: the tools it called, if any, become its calls awaiting
        outcomes. True if it called any (a stopped reply's half-written calls do not)."""
        calls = (reply_calls(gen, msg.content)
                 if gen.finish_reason not in ("cancelled", "switched") else None)
        if not calls:
            return False
        msg.content, msg.tool_calls = calls
        msg.token_ids = None  # the text shown is not all the model wrote
        msg.tool_results = {c["id"]: {"status": "pending", "text": ""} for c in msg.tool_calls}
        self.waiting[msg.id] = msg
        return True

    def set_result(self, msg: ChatMessage, call_id: str, status: str, text: str = "") -> None:
        """A call's outcome (running, done, failed, denied); when every call of the reply
        has one, the results go back to the model and the reply continues."""
        if msg.id not in self.waiting or call_id not in msg.tool_results:
            return  # stopped meanwhile
        msg.tool_results[call_id] = {"status": status, "text": text}
        self._changed(msg)
        if all(o["status"] in ENDED for o in msg.tool_results.values()):
            del self.waiting[msg.id]
            self._resume(msg)

    def stop(self) -> bool:
        """Refuse the calls not answered yet (no reply follows them); True if any waited."""
        if not self.waiting:
            return False
        waiting, self.waiting = list(self.waiting.values()), {}
        self.stopped.emit()
        for msg in waiting:
            for call_id, outcome in msg.tool_results.items():
                if outcome["status"] in ("pending", "running"):
                    msg.tool_results[call_id] = {"status": "denied",
                                                 "text": "Stopped by the user."}
            self._changed(msg)
        return True
