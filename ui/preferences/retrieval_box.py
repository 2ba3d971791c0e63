"""Preferences' "Retrieval model" (issue #51): which model embeds an attached file's
passages beside BM25 when a file is too long to go in whole: keyword only (BM25, no
model), the bundled model, the model serving now, or a model of the library (a decoder's
mean-pooled states, app/server/embeddings/retrieval.py). The library is listed off the
UI thread (it walks the Hugging Face cache and LM Studio's folders) and added when found."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import shiboken6
from PySide6.QtWidgets import QComboBox, QWidget

from app.models.entry import ModelEntry
from app.models.library import BUNDLED_NAME, list_models

log = logging.getLogger(__name__)

KEYWORD_ONLY = "Keyword only (BM25)"
TIP = ("When an attached file is too long to go in whole, its passages most relevant to "
       "the question are chosen by keywords (BM25). With a model chosen here they are also "
       "ranked by that model's embeddings, which finds passages worded differently from "
       "the question; embedding a long file takes a while on the CPU (its chip shows how "
       "far). Choose a model trained for embeddings: a chat model such as the bundled one "
       "ranked worse than keywords alone here (docs/app.md). Applies to the next question.")


def usable(source: str) -> bool:
    """A model retrieval can load: the bundled one or a local file or folder."""
    return source == "bundled" or (bool(source) and Path(source).expanduser().exists())


class RetrievalModelBox(QComboBox):
    """The choice; its data is the model's source ("" for keyword only)."""

    def __init__(self, loaded: Sequence[str] = (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("retrievalModel")
        self.setToolTip(TIP)
        self.addItem(KEYWORD_ONLY, "")
        self.addItem(BUNDLED_NAME, "bundled")
        for source in loaded:
            self._add(f"{_name(source)} (loaded)", source)
        self.listing: asyncio.Future[None] | None = None

    def value(self) -> str:
        return str(self.currentData() or "")

    def set_value(self, source: str) -> None:
        """Show `source` chosen (added when not listed: a saved path, even one gone)."""
        if self.findData(source) < 0:
            self.addItem(_name(source), source)
        self.setCurrentIndex(self.findData(source))

    def add_models(self, entries: Sequence[ModelEntry]) -> None:
        """The library's models that load and read text (an image model's tower is no
        text embedder), each once."""
        for entry in entries:
            if entry.loads and not entry.sees_images and usable(entry.source):
                self._add(entry.name, entry.source)

    def list_library(self, folders: Sequence[str]) -> None:
        """Add the library's models once listed on a worker thread."""
        try:  # the app's loop (qasync's), running now or at its next turn
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:  # no loop at all: the built-in choices only
            return
        self.listing = loop.create_task(self._list(list(folders)))

    async def _list(self, folders: list[str]) -> None:
        try:
            entries = await asyncio.get_running_loop().run_in_executor(
                None, list_models, folders)
        except OSError as exc:
            log.warning("listing the models for retrieval failed: %s", exc)
            return
        if shiboken6.isValid(self):
            self.add_models(entries)

    def _add(self, label: str, source: str) -> None:
        if source and self.findData(source) < 0:
            self.addItem(label, source)


def _name(source: str) -> str:
    if source == "bundled":
        return BUNDLED_NAME
    path = Path(source)
    return path.stem if path.suffix == ".gguf" else path.name or source
