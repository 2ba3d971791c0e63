"""The message input: Enter sends, Shift+Enter starts a new line, Esc asks to stop. Files
dropped on it or pasted into it (local file URLs) are attached, not typed: `files_dropped`
with their paths; an image pasted from the clipboard (a screenshot, "Copy image" in a
browser) is `image_pasted` with its PNG bytes."""

from __future__ import annotations

from PySide6.QtCore import QBuffer, QEvent, QIODevice, QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QImage, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QPlainTextEdit, QSizePolicy, QWidget


class InputBox(QPlainTextEdit):
    submitted = Signal(str)
    escape_pressed = Signal()
    files_dropped = Signal(list)  # local paths dropped or pasted
    image_pasted = Signal(bytes)  # an image's PNG bytes, pasted or dropped as data

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inputBox")
        self.setPlaceholderText("Message  (Enter sends · Shift+Enter new line · Esc stops)")
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().contentsChanged.connect(self.updateGeometry)

    def event(self, event: QEvent) -> bool:
        # Redo (Ctrl+Shift+Z) with nothing to redo is left to the window: Chat → Undo
        # delete. With text to redo, the field keeps it.
        if event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent) \
                and event.matches(QKeySequence.StandardKey.Redo) \
                and not self.document().isRedoAvailable():
            event.ignore()
            return True
        return super().event(event)

    @staticmethod
    def local_files(source: QMimeData) -> list[str]:
        """The local files a drop or a paste carries (none: it is text)."""
        if not source.hasUrls():
            return []
        return [u.toLocalFile() for u in source.urls() if u.isLocalFile()]

    @staticmethod
    def image_png(source: QMimeData) -> bytes | None:
        """The image a paste or a drop carries as data (not a file), as PNG bytes."""
        if not source.hasImage():
            return None
        image = source.imageData()
        if not isinstance(image, QImage) or image.isNull():
            return None
        buffer = QBuffer()
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buffer, "PNG")
        return bytes(buffer.data().data())

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # noqa: N802 - Qt override
        return bool(self.local_files(source)) or source.hasImage() \
            or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 - Qt override
        # a drop and a paste both come here: files are attached, text is typed
        files = self.local_files(source)
        if files:
            self.files_dropped.emit(files)
            return
        png = self.image_png(source)
        if png is not None:  # a screenshot or a copied image: attached, never typed
            self.image_pasted.emit(png)
            return
        super().insertFromMimeData(source)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        key, mods = event.key(), event.modifiers()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) \
                and not mods & Qt.KeyboardModifier.ShiftModifier:
            # blank too: files alone may be sent (the tab decides)
            self.submitted.emit(self.toPlainText())
            event.accept()
            return
        if key == Qt.Key.Key_Escape:
            self.escape_pressed.emit()
            event.accept()
            return
        super().keyPressEvent(event)

    def sizeHint(self) -> QSize:  # noqa: N802 - grows with its text, 2 to 8 lines
        lines = max(2, min(8, self.document().blockCount()))
        line = self.fontMetrics().lineSpacing()
        return QSize(super().sizeHint().width(), lines * line + 18)
