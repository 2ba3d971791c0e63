"""The files attached to the draft, as chips above the input: name, size and token count,
or, for a file that cannot be given, its name and why (red). Files are read on a worker
thread (a 40-page PDF takes a moment) and counted by the tokenizer of the tab's model (the
default one, or the library model the tab picked: issue #50; counted again when the tab's
model changes or loads) off the UI thread (a file too long to go in whole is indexed there
too); the chip says "reading…", then "counting…", then the index's "indexing 42 %" (and
"embedding 10 %" with a retrieval model) meanwhile. A chip's × removes it; nothing typed is
touched either way."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from app.attachments import Attachment, Refused, read_attachment
from app.attachments.read import size_text
from app.context import AppContext

from .chip_row import ChipRow

REMOVE_TIP = "Remove this file from the message"
MAX_LABEL_PX = 300  # a refused chip's reason is cut here


class IndexingStopped(Exception):
    """Raised on the count's thread to end an index build nobody waits for any more."""


class Chip(QWidget):
    """One file: `item` is None while it is read, then its Attachment or Refused;
    `tokens` its count once known."""

    removed = Signal(object)  # the chip

    def __init__(self, path: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentChip")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.path = path
        self.item: Attachment | Refused | None = None
        self.tokens: int | None = None
        self.counting = False  # its tokens are being counted (and its index built)
        self.progress: tuple[str, int] | None = None  # ("indexing", percent) while indexed
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 2, 2, 2)
        row.setSpacing(4)
        self.label = QLabel(f"{path.name or path} · reading…")
        self.label.setObjectName("chipLabel")
        row.addWidget(self.label)
        self.remove_button = QPushButton("×")
        self.remove_button.setObjectName("chipRemove")
        self.remove_button.setToolTip(REMOVE_TIP)
        self.remove_button.setAccessibleName(f"Remove {path.name}")
        self.remove_button.clicked.connect(lambda: self.removed.emit(self))
        row.addWidget(self.remove_button)
        self._set_refused(False)

    def set_item(self, item: Attachment | Refused) -> None:
        self.item = item
        self._set_refused(isinstance(item, Refused))
        self._show()

    def set_tokens(self, tokens: int | None) -> None:
        self.tokens = tokens
        self.progress = None
        self._show()

    def set_progress(self, stage: str, fraction: float) -> None:
        """Its index being built: `stage` ("indexing", "embedding") `fraction` done."""
        if self.tokens is None:
            self.progress = (stage, int(fraction * 100))
            self._show()

    def _show(self) -> None:
        item = self.item
        if isinstance(item, Refused):
            # cut to fit beside other chips in a narrow window; the tooltip has it all
            text = f"{item.name} — {item.message}"
            self.label.setText(self.label.fontMetrics().elidedText(
                text, Qt.TextElideMode.ElideRight, MAX_LABEL_PX))
            self.setToolTip(f"{item.name} is not attached: {item.message}")
            return
        if item is None:
            return
        bits = [item.name, size_text(item.size)]
        # counted off the UI thread; a file too long to go in whole is indexed meanwhile
        if self.tokens is not None:
            bits.append(f"{self.tokens:,} tokens")
        elif self.progress is not None:
            bits.append(f"{self.progress[0]} {self.progress[1]} %")
        else:
            bits.append("counting…")
        if item.kind == "folder":
            bits.insert(1, f"{len(item.parts)} files")
        self.label.setText(" · ".join(bits))
        self.setToolTip(f"{item.name}: {item.kind}"
                        + (f", {item.skipped} files left out (ignored or not text)"
                           if item.skipped else ""))

    def _set_refused(self, refused: bool) -> None:
        value = "true" if refused else "false"
        if self.property("refused") != value:
            self.setProperty("refused", value)
            self.style().unpolish(self)
            self.style().polish(self)


class AttachmentChips(ChipRow):
    """The draft's files. `changed` after a file is read, counted or removed."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None,
                 model: Callable[[], str | None] = lambda: None) -> None:
        """`model()`: the tab's local model now (None: the default one), whose tokenizer
        counts the files."""
        super().__init__("attachmentChips", parent)
        self.ctx = ctx
        self.model = model
        # the tab's model, beside the default one, loaded: its tokenizer counts now
        self._fleet = ctx.bridge.fleet
        if self._fleet is not None:
            self._fleet.changed.connect(self._on_model_changed)
        # set when the chips go (the tab closes, the app quits): an index still being
        # built for one stops at its next progress report instead of holding the exit
        self._stopped = threading.Event()

    def add_paths(self, paths: list[str | Path]) -> list[Chip]:
        """Chips for `paths`, each read (and counted) off the UI thread."""
        added = []
        for p in paths:
            chip = Chip(Path(p))
            self._place(chip, self._read(chip))
            added.append(chip)
        return added

    def add_items(self, items: list[Attachment]) -> list[Chip]:
        """Chips for files already read (a draft's, back after a restart: #52), counted
        off the UI thread; `changed` once."""
        added = []
        for item in items:
            chip = Chip(Path(item.name))
            chip.set_item(item)
            chip.counting = True  # a send waits for its count, as for a file just read
            self._place(chip, self._count(chip, item))
            added.append(chip)
        if added:
            self.changed.emit()
        return added

    async def _read(self, chip: Chip) -> None:
        loop = asyncio.get_running_loop()
        item = await loop.run_in_executor(None, read_attachment, chip.path)
        if not shiboken6.isValid(chip) or chip not in self.chips:
            return
        chip.set_item(item)
        self.changed.emit()
        if isinstance(item, Attachment):
            await self._count(chip, item)

    async def _count(self, chip: Chip, item: Attachment) -> None:
        """`item`'s tokens in the tab's model's tokenizer, again if the model changed while
        it counted."""
        loop = asyncio.get_running_loop()

        def progress(_i: int, stage: str, fraction: float) -> None:  # count's thread
            if self._stopped.is_set():  # the app quits: the index is not wanted
                raise IndexingStopped
            loop.call_soon_threadsafe(self._progressed, chip, stage, fraction)

        chip.counting = True
        try:
            while True:
                model = self.model()
                counts = await self.ctx.bridge.count_attachments([item], progress, model)
                if model == self.model():
                    break
        finally:
            chip.counting = False
        if shiboken6.isValid(chip) and chip in self.chips:
            chip.set_tokens(counts[0] if counts else None)
            self.changed.emit()

    def recount(self) -> None:
        """The tab's model changed: each file counted again in its tokenizer (a count under
        way counts again when it ends)."""
        for chip in self.chips:
            if isinstance(chip.item, Attachment) and not chip.counting:
                chip.set_tokens(None)
                task = asyncio.ensure_future(self._count(chip, chip.item))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _on_model_changed(self, name: str, _state: object) -> None:
        if not shiboken6.isValid(self):  # held weakly: gone with the chips
            return
        model = self.model()
        if model is not None and self.ctx.bridge.local_of(model) is not None \
                and any(c.tokens is None for c in self.chips):
            self.recount()

    def detach(self) -> None:
        self._stopped.set()
        if self._fleet is not None:
            self._fleet.changed.disconnect(self._on_model_changed)
            self._fleet = None
        super().detach()

    def _progressed(self, chip: Chip, stage: str, fraction: float) -> None:
        if shiboken6.isValid(chip) and chip in self.chips:
            chip.set_progress(stage, fraction)

    def attachments(self) -> list[Attachment]:
        """The files read and given (refused and unread ones are not)."""
        return [c.item for c in self.chips if isinstance(c.item, Attachment)]

    @property
    def reading(self) -> bool:
        """A file is still being read, or counted and indexed."""
        return any(c.item is None or (isinstance(c.item, Attachment) and c.tokens is None
                                      and c.counting) for c in self.chips)
