"""A reply's widget in a narrow chat: its stats line wraps instead of widening the chat."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

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


def part_types():
    from ui.chat.image_views import MessageImages
    from ui.chat.message_files import FilesLine, Sources
    from ui.chat.message_view import VersionSwitch
    from ui.chat.thinking_block import ThinkingBlock

    return (ThinkingBlock, FilesLine, MessageImages, Sources, VersionSwitch)


def test_a_plain_message_makes_none_of_the_parts_it_does_not_show(qtbot):
    """A long session's window keeps hundreds of messages: parts most never show (thinking,
    files, images, sources, the version switch) are not made for them (issue #46 item 14:
    ~460 KiB a reply with all of them)."""
    for msg in (ChatMessage("user", "Hello there"),
                ChatMessage("assistant", "A short reply.", finish_reason="stop")):
        widget = MessageWidget(1, msg)
        qtbot.addWidget(widget)
        widget.show()
        assert widget.body.source_text == msg.content
        made = [t.__name__ for t in part_types() if widget.findChildren(t)]
        assert made == []


def test_parts_made_later_take_their_places(qtbot):
    msg = ChatMessage("assistant", "", streaming=True)
    widget = MessageWidget(1, msg)
    qtbot.addWidget(widget)
    widget.show()
    layout = widget.layout()
    msg.reasoning = "Let me think about it."
    widget.refresh()
    qtbot.waitUntil(lambda: widget.thinking.isVisible())
    assert layout.indexOf(widget.thinking) < layout.indexOf(widget.body)
    files = widget.files  # made after the thinking, still above it
    assert layout.indexOf(files) < layout.indexOf(widget.thinking)
    assert not files.isVisible()  # nothing attached: made, but hidden
    widget.set_version(2, 2)
    assert widget.versions.isVisible() and widget.versions.label.text() == "2/2"
    role = widget.findChild(QLabel, "roleLabel")
    # in the header, between "Assistant" and the Copy button
    qtbot.waitUntil(lambda: role.x() < widget.versions.x() < widget.copy_button.x())
    assert abs(widget.versions.y() - role.y()) < role.height()
