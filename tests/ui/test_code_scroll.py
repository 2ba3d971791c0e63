"""Long code lines in a reply scroll sideways instead of wrapping; prose still wraps to the
chat's width, and the scroll bar gets room of its own (it covers no line of code)."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextFormat, QWheelEvent
from PySide6.QtWidgets import QApplication

from app.bridge import ReplyStats
from app.conversation import ChatMessage
from tests.ui.conftest import spin
from ui.chat.markdown_view import MarkdownView

LINE = "result = compute(" + ", ".join(f"argument_{i}" for i in range(24)) + ")"
PROSE = "The engine batches every chat's decode step together, so no chat waits. " * 4
REPLY = f"{PROSE}\n\n```python\n{LINE}\nshort = 1\n```\n\nAfter the code."


def _blocks(doc):
    block = doc.begin()
    while block.isValid():
        yield block
        block = block.next()


def test_a_long_code_line_scrolls_and_prose_wraps(qtbot):
    assert len(LINE) > 300
    view = MarkdownView()
    qtbot.addWidget(view)
    view.resize(420, 10)
    view.show()
    view.set_markdown(REPLY)
    QApplication.processEvents()
    doc = view.document()
    code = next(b for b in _blocks(doc) if b.text() == LINE)
    assert code.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence)
    assert code.layout().lineCount() == 1  # not wrapped
    prose = next(b for b in _blocks(doc) if b.text().startswith("The engine"))
    assert prose.layout().lineCount() > 2  # prose wraps to the view's width
    bar = view.horizontalScrollBar()
    assert bar.maximum() > 0 and bar.isVisible()
    # the view is as tall as its text plus the bar: the last line is not under it
    assert view.height() >= doc.size().height() + bar.height()
    # a sideways wheel (or Shift+wheel) scrolls the code; an upright one is the list's
    wheel = QWheelEvent(view.viewport().rect().center(), view.mapToGlobal(QPoint(5, 5)),
                        QPoint(0, 0), QPoint(-120, 0), Qt.MouseButton.NoButton,
                        Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(view.viewport(), wheel)
    assert bar.value() > 0


def test_no_scroll_bar_without_a_long_line(qtbot):
    view = MarkdownView()
    qtbot.addWidget(view)
    view.resize(420, 10)
    view.show()
    view.set_markdown(f"{PROSE}\n\n```python\nshort = 1\n```\n")
    QApplication.processEvents()
    assert view.horizontalScrollBar().maximum() == 0
    assert not view.horizontalScrollBar().isVisible()


def test_in_a_chat_the_reply_stays_inside_the_window(window, loop):
    tab = window.current_tab()
    stats = ReplyStats(generated_tokens=40, prompt_tokens=10, ttft_s=0.1, tokens_per_s=9.0,
                       e2e_s=1.0, finish_reason="stop")
    tab.conversation.messages[:] = [ChatMessage("user", "code please"),
                                    ChatMessage("assistant", REPLY, finish_reason="stop",
                                                stats=stats)]
    tab.messages.set_messages(tab.conversation.messages)
    window.resize(900, 600)
    for _ in range(6):
        QApplication.processEvents()
        spin(loop, 0.02)
    reply = tab.messages.widgets[1]
    right = tab.messages.viewport().width()
    assert reply.geometry().right() < right  # the line scrolls; the message is not wider
    assert reply.body.horizontalScrollBar().maximum() > 0
    edge = reply.copy_button.mapTo(tab.messages.viewport(),
                                   reply.copy_button.rect().topRight()).x()
    assert reply.copy_button.isVisible() and edge < right
