"""Rich replies: fenced code coloured by Pygments with a working Copy link per block,
Markdown tables as tables, and Copy of a whole reply as plain text or Markdown with a brief
confirmation."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QTextCursor, QTextTable

from app.conversation import ChatMessage
from ui.chat.message_view import COPY_LABEL, MessageWidget

REPLY = """Here is **the** function:

```python
def add(x, y):
    return x + y  # sum
```

| name | value | unit |
|---|---|---|
| speed | 42 | km/h |

And a shell line:

```bash
echo done
```
"""


def _widget(qtbot) -> MessageWidget:
    widget = MessageWidget(1, ChatMessage("assistant", REPLY, finish_reason="stop"))
    qtbot.addWidget(widget)
    widget.resize(600, 400)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def _link_point(view, index: int):
    """Where the Copy link of code block `index` is drawn, in viewport coordinates."""
    doc = view.document()
    href = f"copy-code:{index}"
    block = doc.begin()
    while block.isValid():
        for fragment_it in _fragments(block):
            if fragment_it.charFormat().anchorHref() == href:
                cursor = QTextCursor(doc)
                cursor.setPosition(fragment_it.position() + 1)
                return view.cursorRect(cursor).center()
        block = block.next()
    raise AssertionError(f"no link {href}")


def _fragments(block):
    it = block.begin()
    while not it.atEnd():
        yield it.fragment()
        it += 1


def test_code_is_highlighted_and_each_block_copies(qtbot):
    widget = _widget(qtbot)
    body = widget.body
    assert [(c.language, c.text) for c in body.code_blocks] == [
        ("python", "def add(x, y):\n    return x + y  # sum"), ("bash", "echo done")]
    python, _ = body.code_view(0)  # each code block is a view of its own
    doc = python.document()
    cursor = doc.find("def")
    keyword = cursor.charFormat().foreground().color()
    plain = body.parts[0].document().find("function").charFormat().foreground().color()
    assert keyword != plain  # the keyword is coloured
    comment = doc.find("# sum").charFormat()
    assert comment.foreground().color() != plain
    QGuiApplication.clipboard().clear()
    bash, local = body.code_view(1)
    qtbot.mouseClick(bash.viewport(), Qt.MouseButton.LeftButton, pos=_link_point(bash, local))
    assert QGuiApplication.clipboard().text() == "echo done"
    assert widget.copy_button.text() == "bash copied ✓"
    qtbot.waitUntil(lambda: widget.copy_button.text() == COPY_LABEL, timeout=3000)
    qtbot.mouseClick(python.viewport(), Qt.MouseButton.LeftButton,
                     pos=_link_point(python, 0))
    assert QGuiApplication.clipboard().text() == "def add(x, y):\n    return x + y  # sum"


def test_markdown_tables_render_as_tables(qtbot):
    widget = _widget(qtbot)
    tables = [f for view in widget.body.parts
              for f in view.document().rootFrame().childFrames() if isinstance(f, QTextTable)]
    assert len(tables) == 1
    assert (tables[0].rows(), tables[0].columns()) == (2, 3)
    assert tables[0].cellAt(1, 1).firstCursorPosition().block().text() == "42"


def test_copy_whole_reply_as_plain_text_or_markdown(qtbot):
    widget = _widget(qtbot)
    widget.copy_markdown_action.trigger()
    assert QGuiApplication.clipboard().text() == REPLY
    assert widget.copy_button.text() == "Markdown copied ✓"
    widget.copy_plain_action.trigger()
    text = QGuiApplication.clipboard().text()
    assert "Here is the function:" in text and "**" not in text and "```" not in text
    assert "return x + y" in text and "Copy code" not in text
    assert widget.copy_button.text() == "Text copied ✓"
    qtbot.waitUntil(lambda: widget.copy_button.text() == COPY_LABEL, timeout=3000)
