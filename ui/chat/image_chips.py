"""The images attached to the draft, as chips above the input: a thumbnail, its size in
pixels and bytes, and × to remove it; an image that cannot be given is a red chip with the
reason (app.images' ImageRefused). Images are read off the UI thread (a large photo takes
a moment to decode and check)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from app.images import ImageData, ImageRefused, read_image
from app.images.thumbnail import thumbnail_png

from .chip_row import ChipRow
from .image_views import ImageThumb, image_words

CHIP_THUMB_PX = 36
MAX_REASON_PX = 300  # a refused chip's reason is cut here; the tooltip has it whole
REMOVE_TIP = "Remove this image from the message"
# what the paperclip, a drop or a paste takes as an image (by the file's suffix)
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".gif", ".heic", ".heif", ".bmp",
                  ".tif", ".tiff"}


def is_image_path(path: str | Path) -> bool:
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def _read(data: bytes | Path) -> ImageData | ImageRefused:
    try:
        raw = data.read_bytes() if isinstance(data, Path) else data
        image = read_image(raw)
        thumbnail_png(image, CHIP_THUMB_PX)  # decodes it once more here, off the UI thread
        return image
    except ImageRefused as refused:
        return refused
    except OSError as e:
        return ImageRefused(f"cannot read: {e.strerror or e}")


class ImageChip(QWidget):
    """One image: `item` is None while it is read, then its ImageData or ImageRefused."""

    removed = Signal(object)  # the chip

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentChip")  # the file chips' look
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.name = name
        self.item: ImageData | ImageRefused | None = None
        self.thumb: ImageThumb | None = None
        self._row = row = QHBoxLayout(self)
        row.setContentsMargins(4, 2, 2, 2)
        row.setSpacing(4)
        self.label = QLabel(f"{name} · reading…")
        self.label.setObjectName("chipLabel")
        row.addWidget(self.label)
        self.remove_button = QPushButton("×")
        self.remove_button.setObjectName("chipRemove")
        self.remove_button.setToolTip(REMOVE_TIP)
        self.remove_button.setAccessibleName(f"Remove {name}")
        self.remove_button.clicked.connect(lambda: self.removed.emit(self))
        row.addWidget(self.remove_button)
        self.setProperty("refused", "false")

    def set_item(self, item: ImageData | ImageRefused) -> None:
        self.item = item
        if isinstance(item, ImageRefused):
            self.setProperty("refused", "true")
            self.style().unpolish(self)
            self.style().polish(self)
            text = f"{self.name} — {item.reason}"
            self.label.setText(self.label.fontMetrics().elidedText(
                text, Qt.TextElideMode.ElideRight, MAX_REASON_PX))
            self.setToolTip(f"{self.name} is not attached: {item.reason}")
            return
        self.thumb = ImageThumb(item, CHIP_THUMB_PX, self)
        self._row.insertWidget(0, self.thumb)
        self.label.setText(f"{item.width} x {item.height}")
        self.setToolTip(f"{self.name}: {image_words(item)}")


class ImageChips(ChipRow):
    """The draft's images. `changed` after one is read or removed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("imageChips", parent)

    def add_paths(self, paths: list[str | Path]) -> list[ImageChip]:
        return [self._add(Path(p).name or str(p), Path(p)) for p in paths]

    def add_data(self, data: bytes, name: str = "pasted image") -> ImageChip:
        """An image given as bytes (a paste from the clipboard)."""
        return self._add(name, data)

    def add_images(self, images: list[tuple[str, ImageData]]) -> list[ImageChip]:
        """Images already read (a draft's, back after a restart), by name; `changed` once."""
        chips = []
        for name, image in images:
            chip = ImageChip(name)
            chip.set_item(image)
            self._place(chip, None)
            chips.append(chip)
        if chips:
            self.changed.emit()
        return chips

    def _add(self, name: str, source: bytes | Path) -> ImageChip:
        chip = ImageChip(name)
        self._place(chip, self._read(chip, source))
        return chip

    async def _read(self, chip: ImageChip, source: bytes | Path) -> None:
        item = await asyncio.get_running_loop().run_in_executor(None, _read, source)
        if shiboken6.isValid(chip) and chip in self.chips:
            chip.set_item(item)
            self.changed.emit()

    def images(self) -> list[ImageData]:
        """The images read and given (refused and unread ones are not)."""
        return [c.item for c in self.chips if isinstance(c.item, ImageData)]

    @property
    def reading(self) -> bool:
        return any(c.item is None for c in self.chips)
