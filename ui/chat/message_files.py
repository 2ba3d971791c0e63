"""What a message shows of files: a user message's attached files (name and size, one line)
and, under a reply to files that did not fit, the passages it was given ("Sources"), each
a link that opens the passage."""

from __future__ import annotations

from html import escape
from typing import Any

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.attachments import Attachment
from app.attachments.read import size_text

from ..theme import is_dark

LINK_LIGHT, LINK_DARK = "#1a73e8", "#8ab4f8"  # the looks' blues (ui/theme.py)
SOURCES_TIP = ("The passages of the attached files this reply was given (the files were "
               "too long to go in whole). Click one to read it.")


def files_text(attachments: tuple[Any, ...]) -> str:
    """'Files: report.pdf (31.0 KB) · notes.md (812 bytes)'; a file not kept says so."""
    bits = [f"{a.name} ({size_text(a.size)})" if isinstance(a, Attachment)
            else f"{a.name} (not kept)" for a in attachments]
    return "Files: " + " · ".join(bits) if bits else ""


class FilesLine(QLabel):
    """A user message's files."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("filesLine")
        self.setWordWrap(True)
        self.hide()

    def show_files(self, attachments: tuple[Any, ...]) -> None:
        text = files_text(attachments)
        self.setText(text)
        self.setVisible(bool(text))


class Sources(QLabel):
    """A reply's citations as links; `opened(citation)` when one is clicked (the passage
    dialog is shown too)."""

    opened = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sourcesLine")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.setToolTip(SOURCES_TIP)
        self.citations: tuple[Any, ...] = ()
        self.dialog: PassageDialog | None = None
        self.linkActivated.connect(self._open)
        self.hide()

    def show_citations(self, citations: tuple[Any, ...]) -> None:
        if citations == self.citations:
            return
        self.citations = citations
        self._render()

    def _render(self) -> None:
        # a rich-text link takes no style-sheet colour: the look's own blue, inline
        colour = LINK_DARK if is_dark() else LINK_LIGHT
        links = [f'<a style="color: {colour}" href="{c.n}">[{c.n}] {escape(c.where())}</a>'
                 for c in self.citations]
        self.setText("Sources: " + " · ".join(links) if links else "")
        self.setVisible(bool(links))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt override
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange) \
                and self.citations:
            self._render()  # the look switched

    def _open(self, href: str) -> None:
        cited = next((c for c in self.citations if str(c.n) == href), None)
        if cited is None:
            return
        self.dialog = PassageDialog(cited, self.window())
        self.dialog.show()
        self.opened.emit(cited)


class PassageDialog(QDialog):
    """One cited passage: where it is, and its text."""

    def __init__(self, citation: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"[{citation.n}] {citation.where()}")
        layout = QVBoxLayout(self)
        where = QLabel(citation.where())
        where.setObjectName("roleLabel")
        layout.addWidget(where)
        self.text = QPlainTextEdit(citation.text)
        self.text.setReadOnly(True)
        layout.addWidget(self.text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(560, 360)
