"""Chat → Speculative decoding: the app-wide choice (off, n-gram, a draft model), saved in the
settings and used when a model is next loaded; "Apply now" reloads the model with it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox, QWidget

from app import speculative as spec
from app.bridge import EngineBridge
from app.settings import Settings

from . import file_dialogs


class SpeculativeMenu(QMenu):
    """`actions` by choice ("off", "ngram", "draft"); `note` says what the engine runs now
    and when a change applies; `apply_now` reloads the model (`reload()`)."""

    def __init__(self, settings: Settings, bridge: EngineBridge, reload: Callable[[], object],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("speculativeMenu")
        self.settings, self.bridge, self._reload = settings, bridge, reload
        group = QActionGroup(self)
        self.actions_by_choice: dict[str, QAction] = {}
        for choice, text in ((spec.OFF, "&Off"), (spec.NGRAM, "&N-gram (prompt lookup)"),
                             ("draft", "&Draft model…")):
            action = self.addAction(text)
            action.setCheckable(True)
            group.addAction(action)
            self.actions_by_choice[choice] = action
        off, ngram, draft = (self.actions_by_choice[c] for c in (spec.OFF, spec.NGRAM, "draft"))
        off.setToolTip("Every token is decoded one step at a time.")
        ngram.setToolTip("Drafts looked up in each chat's own prompt and reply, checked in "
                         "the same batched step: faster when replies repeat what they read "
                         "(code edits, quotes); never changes a reply.")
        off.triggered.connect(lambda: self.choose(spec.OFF))
        ngram.triggered.connect(lambda: self.choose(spec.NGRAM))
        draft.triggered.connect(self.choose_draft)
        draft.setToolTip("A smaller model with the same tokenizer drafts for the loaded one.")
        self.setToolTipsVisible(True)
        self.addSeparator()
        self.note = self.addAction("")
        self.note.setEnabled(False)  # a line of text, not a command
        self.apply_now = self.addAction("&Apply now (reloads the model)")
        self.apply_now.triggered.connect(self._apply)
        self.aboutToShow.connect(self.refresh)
        self.refresh()

    def running(self) -> str | None:
        """The mode the loaded engine runs (None: no model loaded)."""
        stats = self.bridge.stats()
        return stats.speculative if stats is not None else None

    def refresh(self) -> None:
        """Check the chosen entry; say what runs now and whether a change waits."""
        chosen = self.settings.speculative
        key = "draft" if chosen.startswith(spec.DRAFT_PREFIX) else chosen
        for choice, action in self.actions_by_choice.items():
            action.setChecked(choice == key)
        if key == "draft":
            self.actions_by_choice["draft"].setText(f"&{spec.label(chosen)}…")
        running = self.running()
        waiting = running is not None and running != chosen
        if running is None:
            self.note.setText("Applies when a model is loaded")
        elif waiting:
            self.note.setText(f"Now running: {spec.label(running)} · applies at the next "
                              "model load")
        else:
            self.note.setText(f"Now running: {spec.label(running)}")
        self.apply_now.setVisible(waiting)

    def choose(self, choice: str) -> None:
        try:
            self.settings.set_speculative(choice)
        except ValueError as exc:
            QMessageBox.warning(self.parentWidget(), "Speculative decoding", str(exc))
        self.refresh()

    def choose_draft(self) -> None:
        """Pick the draft model: a .gguf file, or any file in an mlx-lm model folder."""
        path, _ = QFileDialog.getOpenFileName(
            self.parentWidget(), "Draft model (a smaller model, same tokenizer)",
            file_dialogs.start_path(), "Models (*.gguf config.json);;All files (*)")
        file_dialogs.remember(path)
        if path:
            chosen = Path(path)
            self.choose(spec.DRAFT_PREFIX + str(chosen if chosen.suffix == ".gguf"
                                                else chosen.parent))
        else:
            self.refresh()  # cancelled: the check mark goes back

    def _apply(self) -> None:
        self._reload()
        self.refresh()
