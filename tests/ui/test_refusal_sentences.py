"""ui/refusals.py words a tab's checks before a request is made (app/conversation.py's, and
ui/chat/token_count.py's over-the-context draft) from their Refusal's code, message and
detail: the sentences a person read when these were notices in words (#47)."""

from __future__ import annotations

from app.images.refusal import IMAGES_WITH_TOOLS, images_refused
from app.request import Refusal, RefusalCode
from app.server.errors import STATUS
from engine.public import lone_surrogate
from ui.refusals import notice_text, refusal_sentence


def test_a_tabs_checks_before_sending_keep_their_sentences() -> None:
    bad = lone_surrogate("hi \ud800 there")
    assert bad is not None
    cases = [
        (Refusal(RefusalCode.BAD_CHARACTER, f"the message {bad}", param="content"),
         f"Not sent: the message {bad}. Remove or retype that character."),
        (Refusal(RefusalCode.IMAGES_NOT_READ, images_refused("tiny", lead=""),
                 param="images"),
         images_refused("tiny")),
        (Refusal(RefusalCode.IMAGES_NOT_READ, images_refused("tiny", sent=False, lead=""),
                 param="messages"),
         images_refused("tiny", sent=False)),
        (Refusal(RefusalCode.IMAGES_WITH_TOOLS, IMAGES_WITH_TOOLS, param="tools"),
         f"Not sent: {IMAGES_WITH_TOOLS} (this chat's tools: the settings)."),
        (Refusal(RefusalCode.ANSWER_COUNT, "n must be 1 to 4, not 5", param="n",
                 detail={"n": 5, "most": 4}),
         "Ask for 1 to 4 answers at once (not 5)."),
        (Refusal(RefusalCode.CONTEXT_LENGTH_EXCEEDED, "over", param="messages",
                 detail={"tokens": 600, "context": 512}),
         "Not sent: with this message the prompt is 600 tokens, but the model's context "
         "holds 512 in all, the reply included. Shorten the message, delete earlier "
         "messages (⋯ → Delete from here), let the settings' Context overflow leave older "
         "ones out, or start a new chat."),
        # a model switch waits: the bridge's sentence, as it says it
        (Refusal(RefusalCode.MODEL_NOT_READY, "Switching models: wait a moment."),
         "Switching models: wait a moment."),
    ]
    for refusal, sentence in cases:
        assert refusal_sentence(refusal) == sentence, refusal
        assert notice_text(refusal) == sentence
    assert notice_text("Loading tiny …") == "Loading tiny …" and notice_text(None) is None


def test_every_refusal_code_has_an_http_status() -> None:
    # the tab's own codes are never answered by the server, but the map stays whole
    assert set(STATUS) == set(RefusalCode)
