"""Images shown in the window: a message's thumbnails (a click opens the image full size
in a dialog) and the pixmaps made from app.images' PNG bytes (Pillow scales them, so no Qt
image-format plugin is needed for WebP or HEIC)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.attachments.read import size_text
from app.images import ImageData
from app.images.thumbnail import full_png, thumbnail_png

THUMB_PX = 160  # a sent message's thumbnails fit this square (the draft's chips are smaller)
OPEN_TIP = "Click to see it full size"


def pixmap(png: bytes) -> QPixmap:
    out = QPixmap()
    out.loadFromData(png, "PNG")
    return out


def image_words(image: ImageData) -> str:
    """'640 x 480 · PNG · 12.3 KB'."""
    kind = image.mime.removeprefix("image/").upper()
    return f"{image.width} x {image.height} · {kind} · {size_text(len(image.data))}"


class ImageDialog(QDialog):
    """One image at its own size (scrolled when larger than the screen allows)."""

    def __init__(self, image: ImageData, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("imageDialog")
        self.setWindowTitle(f"Image · {image_words(image)}")
        layout = QVBoxLayout(self)
        self.picture = QLabel()
        self.picture.setObjectName("fullImage")
        self.picture.setPixmap(pixmap(full_png(image)))
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        area = QScrollArea()
        area.setWidget(self.picture)
        area.setWidgetResizable(True)
        area.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(area, 1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        screen = self.screen().availableGeometry() if self.screen() else None
        most = QSize(screen.width() * 9 // 10, screen.height() * 9 // 10) if screen \
            else QSize(1200, 800)
        self.resize(min(image.width + 40, most.width()), min(image.height + 80, most.height()))


class ImageThumb(QToolButton):
    """A thumbnail that opens its image full size."""

    opened = Signal(object)  # the dialog

    def __init__(self, image: ImageData, size: int = THUMB_PX,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("imageThumb")
        self.image = image
        small = pixmap(thumbnail_png(image, size))
        self.setIcon(QIcon(small))
        self.setIconSize(small.size())  # the picture's own shape: no band above and below
        self.setAutoRaise(True)
        self.setToolTip(f"{image_words(image)}. {OPEN_TIP}")
        self.setAccessibleName(f"Image {image.width} x {image.height}")
        self.dialog: ImageDialog | None = None
        self.clicked.connect(self.open_full)

    def open_full(self) -> ImageDialog:
        self.dialog = ImageDialog(self.image, self.window())
        self.dialog.show()
        self.opened.emit(self.dialog)
        return self.dialog


class MessageImages(QWidget):
    """A user message's images, as thumbnails in a row (hidden when it has none)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageImages")
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 2, 0, 2)
        self._row.setSpacing(6)
        self._row.addStretch(1)
        self.thumbs: list[ImageThumb] = []
        self._shown: tuple[str, ...] = ()
        self.hide()

    def show_images(self, images: Sequence[ImageData]) -> None:
        digests = tuple(i.digest for i in images)
        if digests == self._shown:
            return
        self._shown = digests
        for thumb in self.thumbs:
            thumb.deleteLater()
        self.thumbs = [ImageThumb(i) for i in images]
        for thumb in self.thumbs:
            self._row.insertWidget(self._row.count() - 1, thumb)
        self.setVisible(bool(self.thumbs))
