"""A reply's widget in a narrow chat: its stats line wraps instead of widening the chat."""

from __future__ import annotations

from app.bridge import ReplyStats
from app.conversation import ChatMessage
from ui.chat.message_view import MessageWidget


def test_a_long_stats_line_wraps_in_a_narrow_chat(qtbot):
    msg = ChatMessage("assistant", "A short reply.", finish_reason="stop",
                      stats=ReplyStats(generated_tokens=23, prompt_tokens=150, ttft_s=0.26,
                                       tokens_per_s=9.9, e2e_s=2.5, finish_reason="stop",
                                       cached_tokens=129))
    widget = MessageWidget(1, msg)
    qtbot.addWidget(widget)
    widget.show()
    text = widget.stats.text()
    assert "129 of 150 prompt tokens cached" in text
    full = widget.stats.fontMetrics().horizontalAdvance(text)
    assert widget.minimumSizeHint().width() < full  # the line does not set the width
    widget.resize(full // 2, widget.heightForWidth(full // 2))
    qtbot.waitUntil(lambda: widget.stats.height() > widget.stats.fontMetrics().height() * 1.5)
