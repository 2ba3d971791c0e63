"""The ways into Compare: a tab's "Compare…" button and Chat → Compare…, one view per tab."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from PySide6.QtCore import QObject
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QPlainTextEdit, QPushButton, QWidget

from app.context import AppContext
from app.conversation import Conversation

from .dialog import CompareDialog

if TYPE_CHECKING:
    from ..chat.image_chips import ImageChips

Q = TypeVar("Q", bound=QObject)


class ChatTab(Protocol):
    """What Compare needs of a chat tab (ui/chat/chat_tab.py's ChatTab, a QWidget, which puts
    compare_button in its top row): a protocol, so ui/compare never imports the tab back."""

    conversation: Conversation
    ctx: AppContext
    input: QPlainTextEdit
    image_chips: ImageChips  # the draft's images, sent to every target

    def findChildren(self, kind: type[Q]) -> list[Q]: ...
    def window(self) -> QWidget: ...

MAX_SIZE = (1100, 720)


def open_compare(tab: ChatTab) -> CompareDialog:
    """The tab's compare view, in front: the one open already, else a new one with the
    tab's input box text as its message, as large as the window allows (900×600 too)."""
    for dialog in tab.findChildren(CompareDialog):
        if dialog.isVisible():
            dialog.raise_()
            dialog.activateWindow()
            return dialog
    dialog = CompareDialog(tab.conversation, tab.ctx.settings, tab.input.toPlainText(),
                           cast(QWidget, tab),  # a ChatTab is a QWidget
                           images=tab.image_chips.images())
    # a tab closed under an open view takes the view with it; its chat holds the view's
    # listeners weakly (app/events.py), so nothing is left to detach
    dialog.sent.connect(tab.input.clear)  # the message went out, as Send clears it
    dialog.sent.connect(tab.image_chips.clear)  # with the draft's images
    window = tab.window().geometry()
    width = min(MAX_SIZE[0], window.width() - 40)
    height = min(MAX_SIZE[1], window.height() - 40)
    dialog.resize(max(width, 600), max(height, 420))
    dialog.move(window.center() - dialog.rect().center())
    dialog.show()
    # the keys come here: a window shown is not always made active (X without a window
    # manager's help), and Enter then sent the draft in the tab behind
    dialog.raise_()
    dialog.activateWindow()
    dialog.message_box.setFocus()
    dialog.message_box.moveCursor(QTextCursor.MoveOperation.End)  # typing goes on the draft
    return dialog


def compare_button(tab: ChatTab) -> QPushButton:
    """A flat "Compare…" button for the tab's top row."""
    button = QPushButton("Compare…")
    button.setObjectName("flatButton")
    button.setToolTip("Send one message to several presets or connections side by side "
                      "and continue with the answer you like (Ctrl+Shift+C)")
    button.clicked.connect(lambda: open_compare(tab))
    return button
