"""RequestStream.listen: events by a call each instead of `async for` (the app's bridge)."""

from __future__ import annotations

from engine.stream import RequestStream
from engine.token_event import TokenEvent


def test_listen_hands_over_queued_events_then_each_new_one_in_order() -> None:
    stream = RequestStream("r", [1, 2], cancel=lambda _id: None)
    stream._push(TokenEvent("r", 5, "a"))
    seen: list[TokenEvent] = []
    stream.listen(seen.append)
    assert [e.text for e in seen] == ["a"]
    stream._push(TokenEvent("r", 6, "b"))
    stream._push(TokenEvent("r", None, "", "length"))
    assert [e.text for e in seen] == ["a", "b", ""] and seen[-1].finish_reason == "length"
    assert stream.text == "ab" and stream.tokens == [5, 6] and stream.finished
    stream._push(TokenEvent("r", 7, "c"))  # nothing after the end
    assert len(seen) == 3
