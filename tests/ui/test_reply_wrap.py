"""Finished replies re-wrap at any width: nothing is clipped past the chat's right edge,
their Copy/Edit buttons stay on screen, and a narrower chat makes them taller."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from app.bridge import ReplyStats
from app.conversation import ChatMessage
from tests.ui.conftest import spin

PARAGRAPH = ("The engine batches every chat's decode step together and prefills new "
             "prompts in chunks between them, so a long prompt never freezes a chat. ") * 6
LONG_WORD = "https://example.org/" + "very-long-path-segment/" * 12
CODE = "```python\n" + "result = compute(" + ", ".join(f"arg{i}" for i in range(40)) + ")\n```"
TABLE = "| " + " | ".join(f"column {i}" for i in range(12)) + " |\n|" + "---|" * 12 + \
    "\n| " + " | ".join(f"value {i}" for i in range(12)) + " |"


def _stats() -> ReplyStats:
    return ReplyStats(generated_tokens=230, prompt_tokens=1500, ttft_s=0.26, tokens_per_s=9.9,
                      e2e_s=25.0, finish_reason="stop", cached_tokens=1290)


def _settle(loop) -> None:
    for _ in range(6):
        QApplication.processEvents()
        spin(loop, 0.02)


def _messages() -> list[ChatMessage]:
    out = []
    for text in (PARAGRAPH, LONG_WORD, CODE, TABLE):
        out.append(ChatMessage("user", text))
        out.append(ChatMessage("assistant", text, finish_reason="stop", stats=_stats()))
    return out


def test_finished_replies_rewrap_and_keep_their_buttons(window, loop):
    tab = window.current_tab()
    tab.conversation.messages[:] = _messages()
    tab.messages.set_messages(tab.conversation.messages)
    window.resize(1200, 780)
    _settle(loop)
    wide = {id(w): w.height() for w in tab.messages.widgets}
    # narrower: the settings panel opens and the stats dock too
    window.ctx.settings.set_settings_panel(True)
    window.resize(900, 600)
    window.stats_dock.show()
    _settle(loop)
    viewport = tab.messages.viewport()
    right = viewport.width()
    assert right < 700  # really narrower than before
    for w in tab.messages.widgets:
        box = w.geometry()
        assert box.right() < right, f"message {w.index} clipped: {box} vs {right}"
        button = w.edit_button if w.message.role == "user" else w.copy_button
        edge = button.mapTo(viewport, button.rect().topRight()).x()
        assert button.isVisible() and edge < right, f"message {w.index}: button off screen"
        if w.message.role == "assistant":
            stats_edge = w.stats.mapTo(viewport, w.stats.rect().topRight()).x()
            assert w.stats.isVisible() and stats_edge < right
    prose = tab.messages.widgets[1]
    assert prose.height() > wide[id(prose)]  # the paragraph re-wrapped into more lines
    # and back: wider again, it gets shorter again
    window.stats_dock.hide()
    window.ctx.settings.set_settings_panel(False)
    window.resize(1200, 780)
    _settle(loop)
    assert prose.height() <= wide[id(prose)]
