"""Long code lines in a reply scroll sideways instead of wrapping: each fenced code block is
a view of its own whose scroll bar moves only the code (with room of its own under it),
while the prose around it wraps to the chat's width."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QTextFormat, QWheelEvent
from PySide6.QtWidgets import QApplication

from app.bridge import ReplyStats
from app.conversation import ChatMessage
from tests.ui.conftest import spin
from ui.chat.reply_body import ReplyBody, split_fences

LINE = "result = compute(" + ", ".join(f"argument_{i}" for i in range(24)) + ")"
PROSE = "The engine batches every chat's decode step together, so no chat waits. " * 4
REPLY = f"{PROSE}\n\n```python\n{LINE}\nshort = 1\n```\n\nAfter the code."


def _blocks(doc):
    block = doc.begin()
    while block.isValid():
        yield block
        block = block.next()


def _body(qtbot, text: str) -> ReplyBody:
    body = ReplyBody()
    qtbot.addWidget(body)
    body.resize(420, 10)
    body.show()
    body.set_markdown(text)
    QApplication.processEvents()
    return body


def test_a_long_code_line_scrolls_alone_and_prose_wraps(qtbot):
    assert len(LINE) > 300
    body = _body(qtbot, REPLY)
    prose, code, after = body.parts
    assert not prose.code_scrolls and code.code_scrolls and not after.code_scrolls
    line = next(b for b in _blocks(code.document()) if b.text() == LINE)
    assert line.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence)
    assert line.layout().lineCount() == 1  # not wrapped
    para = next(b for b in _blocks(prose.document()) if b.text().startswith("The engine"))
    assert para.layout().lineCount() > 2  # prose wraps to the view's width
    bar = code.horizontalScrollBar()
    assert bar.maximum() > 0 and bar.isVisible()
    assert prose.horizontalScrollBar().maximum() == 0  # the prose never scrolls sideways
    # the code view is as tall as its text plus the bar: the last line is not under it
    assert code.height() >= code.document().size().height() + bar.height()
    # a sideways wheel scrolls the code; the prose stays where it is
    wheel = QWheelEvent(code.viewport().rect().center(), code.mapToGlobal(QPoint(5, 5)),
                        QPoint(0, 0), QPoint(-120, 0), Qt.MouseButton.NoButton,
                        Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(code.viewport(), wheel)
    assert bar.value() > 0
    assert body.toPlainText().startswith("The engine") and "After the code." in \
        body.toPlainText()
    assert [c.text for c in body.code_blocks] == [f"{LINE}\nshort = 1"]


def test_no_scroll_bar_without_a_long_line(qtbot):
    body = _body(qtbot, f"{PROSE}\n\n```python\nshort = 1\n```\n")
    code = body.parts[1]
    assert code.horizontalScrollBar().maximum() == 0
    assert not code.horizontalScrollBar().isVisible()


def test_split_at_fences_that_start_a_line():
    assert split_fences("a\n```py\nx\n```\nb") == [(False, "a"), (True, "```py\nx\n```"),
                                                     (False, "b")]
    # a fence left open (a reply still streaming) runs to the end
    assert split_fences("a\n~~~\nx\ny") == [(False, "a"), (True, "~~~\nx\ny")]
    # a longer closing fence closes; a shorter one is code
    assert split_fences("````\n```\n````") == [(True, "````\n```\n````")]
    # indented (in a list item) stays in its prose, as does inline ``` code ```
    listed = "1. step\n   ```\n   x\n   ```\n2. next"
    assert split_fences(listed) == [(False, listed)]
    assert split_fences("```inline``` text") == [(False, "```inline``` text")]
    assert split_fences("") == [(False, "")]


def test_streaming_re_renders_only_the_piece_that_changed(qtbot):
    body = _body(qtbot, f"{PROSE}\n\n```python\nx = 1")
    prose, code = body.parts
    renders = prose.num_renders
    body.set_markdown(f"{PROSE}\n\n```python\nx = 1\ny = 2\n```\n\nDone.")
    assert body.parts[:2] == [prose, code] and prose.num_renders == renders
    assert body.parts[2].toPlainText() == "Done."


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
    assert reply.body.parts[1].horizontalScrollBar().maximum() > 0
    edge = reply.copy_button.mapTo(tab.messages.viewport(),
                                   reply.copy_button.rect().topRight()).x()
    assert reply.copy_button.isVisible() and edge < right
