"""A reply's widget in a narrow chat: its stats line wraps instead of widening the chat."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
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


@pytest.mark.parametrize("dark", [None, False, True], ids=["plain", "light", "dark"])
def test_a_messages_menus_are_made_when_first_opened_and_look_the_same_before(qtbot, dark):
    """Copy's and "⋯"'s menus are made on the first press (~20 KiB each, two a reply);
    the buttons are drawn and sized as buttons with a menu from the start, in the plain
    style and in the app's style sheets."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QMenu

    from ui.theme import stylesheet

    widget = MessageWidget(1, ChatMessage("assistant", "A reply.", finish_reason="stop"))
    if dark is not None:
        widget.setStyleSheet(stylesheet(dark))
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    assert widget.findChildren(QMenu) == []
    more = widget.more_button
    hint = more.sizeHint()
    asked: list[tuple[str, int]] = []
    widget.action_requested.connect(lambda name, index: asked.append((name, index)))

    def pick_branch() -> None:  # in the menu's own loop (a button's menu runs exec())
        menu = more.menu()
        branch = next(a for a in menu.actions() if a.objectName() == "branch")
        qtbot.mouseClick(menu, Qt.MouseButton.LeftButton,
                         pos=menu.actionGeometry(branch).center())

    QTimer.singleShot(200, pick_branch)
    qtbot.mouseClick(more, Qt.MouseButton.LeftButton)  # the first press makes and opens it
    qtbot.waitUntil(lambda: asked == [("branch", 1)])
    assert more.menu() is not None and more.sizeHint() == hint
    copy = widget.copy_button  # (not pressed, nor under the pointer: its look compares)
    hint, look = copy.sizeHint(), copy.grab().toImage()
    assert copy.menu() is None
    assert [a.text() for a in copy.ensure_menu().actions()] == [
        "Copy as plain text", "Copy as Markdown"]
    assert copy.sizeHint() == hint
    assert copy.grab().toImage() == look  # the same pixels with the menu as before it


def test_a_key_opens_a_menu_not_made_yet(qtbot):
    from PySide6.QtCore import QTimer

    widget = MessageWidget(1, ChatMessage("assistant", "A reply.", finish_reason="stop"))
    qtbot.addWidget(widget)
    widget.show()
    copy = widget.copy_button
    opened: list[bool] = []

    def close_it() -> None:
        opened.append(copy.menu().isVisible())
        copy.menu().close()

    QTimer.singleShot(200, close_it)
    copy.setFocus()
    qtbot.keyClick(copy, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: opened == [True])
