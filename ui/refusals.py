"""The window's sentence for a refused request (app.request's Refusal): the one place a
refusal's code becomes words for a person. The API server's counterpart is
app/server/errors.py (code -> HTTP status and OpenAI's error body)."""

from __future__ import annotations

from app.request import Refusal, RefusalCode

# refusals whose message already says it all, as a person needs it
_AS_SAID = (RefusalCode.MODEL_NOT_READY, RefusalCode.SHUTTING_DOWN, RefusalCode.MODEL_NOT_FOUND)


def refusal_sentence(refusal: Refusal) -> str:
    """What the tab or the compare view shows for `refusal`."""
    before = _before_sending(refusal)
    if before is not None:
        return before
    if refusal.code == RefusalCode.QUEUE_FULL:
        return f"The engine's queue is full; try again in a moment. ({refusal.message})"
    if refusal.code in _AS_SAID:
        return refusal.message
    return f"Request refused: {refusal.message}"


def notice_text(note: str | Refusal | None) -> str | None:
    """A notice as shown: a sentence as it is, a refusal worded."""
    return refusal_sentence(note) if isinstance(note, Refusal) else note


def _before_sending(refusal: Refusal) -> str | None:
    """The sentence for a tab's own checks before a request is made (app/conversation.py,
    ui/chat/token_count.py): nothing was sent, the draft stays; None for other codes."""
    code, detail = refusal.code, refusal.detail
    if code == RefusalCode.BAD_CHARACTER:
        return f"Not sent: {refusal.message}. Remove or retype that character."
    if code == RefusalCode.IMAGES_NOT_READ:
        return f"Not sent: {refusal.message}"
    if code == RefusalCode.IMAGES_WITH_TOOLS:
        return f"Not sent: {refusal.message} (this chat's tools: the settings)."
    if code == RefusalCode.ANSWER_COUNT:
        return f"Ask for 1 to {detail['most']} answers at once (not {detail['n']})."
    if code == RefusalCode.CONTEXT_LENGTH_EXCEEDED:
        return (f"Not sent: with this message the prompt is {detail['tokens']} tokens, but "
                f"the model's context holds {detail['context']} in all, the reply included. "
                "Shorten the message, delete earlier messages (⋯ → Delete from here), let the "
                "settings' Context overflow leave older ones out, or start a new chat.")
    return None
