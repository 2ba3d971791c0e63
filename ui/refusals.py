"""The window's sentence for a refused request (app.request's Refusal): the one place a
refusal's code becomes words for a person. The API server's counterpart is
app/server/errors.py (code -> HTTP status and OpenAI's error body)."""

from __future__ import annotations

from app.request import Refusal, RefusalCode

# refusals whose message already says it all, as a person needs it
_AS_SAID = (RefusalCode.MODEL_NOT_READY, RefusalCode.SHUTTING_DOWN, RefusalCode.MODEL_NOT_FOUND)


def refusal_sentence(refusal: Refusal) -> str:
    """What the tab or the compare view shows for `refusal`."""
    if refusal.code == RefusalCode.QUEUE_FULL:
        return f"The engine's queue is full; try again in a moment. ({refusal.message})"
    if refusal.code in _AS_SAID:
        return refusal.message
    return f"Request refused: {refusal.message}"


def notice_text(note: str | Refusal | None) -> str | None:
    """A notice as shown: a sentence as it is, a refusal worded."""
    return refusal_sentence(note) if isinstance(note, Refusal) else note
