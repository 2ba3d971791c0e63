"""The Preferences dialog: the defaults for new tabs (system prompt, sampling, stop strings,
output format, a reasoning model's thinking), typed and checked by app/defaults.py before
anything is saved."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGridLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from app import kv_bits as kv
from app.defaults import (
    DEFAULT_PARAMS,
    LABELS,
    LIMITS,
    Defaults,
    DefaultsError,
    describe,
    parse_value,
)
from app.settings import Settings

from ..chat.output_format_box import OutputFormatBox
from ..chat.overflow_box import OverflowBox
from ..chat.reasoning_box import ReasoningBox
from .retrieval_box import RetrievalModelBox, usable

INTRO = ("New tabs start with these. Open tabs keep their own settings; their settings "
         "panel marks each value that differs from these with •.")
PICK_PRESET = "Fill in from a preset…"
REASONING_LABEL = "Reasoning models"
KV_LABEL = "KV cache"
RETRIEVAL_LABEL = "Retrieval model"  # chat with files (#51)
KV_TIP = ("How each chat's keys and values are kept. 8-bit holds 1.8 (a float16 cache) to "
          "3.6 (float32, as on the CPU) times float's tokens in the same memory: more chats "
          "or a longer context, measured level with llama.cpp's q8_0. 4-bit holds 2.7 to "
          "5.3 times, with answers clearly further from float's. Applies at the next model "
          "load: Save reloads the model now (running replies are asked about first).")


NUMBER_COLUMNS = 2  # the number settings side by side: the dialog fits a 600-pixel window


def range_hint(key: str) -> str:
    """What setting `key` takes, beside its field: "0 – 5", "off, 1 – 100000"."""
    limit = LIMITS[key]
    if key == "seed":
        return "random, or ≥ 0"
    lo = int(limit.lo) + (1 if limit.special else 0) if limit.integer else limit.lo
    hi = int(limit.hi) if limit.integer else limit.hi
    span = f"{lo:g} – {hi:g}" if not limit.integer else f"{lo} – {hi}"
    return f"{limit.special}, {span}" if limit.special else span


class PreferencesDialog(QDialog):
    """Shows the saved defaults; Save checks every value first and saves nothing (with the
    reason, at the field) when one cannot be a default."""

    def __init__(self, settings: Settings, parent: QWidget | None = None,
                 reload: Callable[[], object] | None = None,
                 loaded: Sequence[str] = ()) -> None:
        super().__init__(parent)
        self.setWindowTitle("Preferences")
        self.setObjectName("preferencesDialog")
        self.settings = settings
        self._reload = reload  # loads the model serving now again (its switch question)
        layout = QVBoxLayout(self)
        heading = QLabel("Defaults for new tabs")
        heading.setObjectName("dialogHeading")
        layout.addWidget(heading)
        intro = QLabel(INTRO)
        intro.setObjectName("hintLabel")
        intro.setWordWrap(True)
        layout.addWidget(intro)

        self.preset = QComboBox()
        self.preset.setObjectName("fillFromPreset")
        self.preset.setToolTip("Put a preset's sampling values in the form (saved only with "
                               "Save)")
        self.preset.activated.connect(self._preset_chosen)
        self._fill_presets()
        layout.addWidget(self.preset)

        layout.addWidget(QLabel(LABELS["system_prompt"]))
        self.system = QPlainTextEdit()
        self.system.setObjectName("systemPrompt")
        self.system.setMaximumHeight(64)
        layout.addWidget(self.system)
        # label | field | range, twice across
        grid = QGridLayout()
        grid.setHorizontalSpacing(8)
        grid.setColumnMinimumWidth(3, 12)
        self.fields: dict[str, QLineEdit] = {}
        rows = -(-len(LIMITS) // NUMBER_COLUMNS)
        for i, key in enumerate(LIMITS):
            edit = self.fields[key] = QLineEdit()
            edit.setObjectName(key)
            edit.setFixedWidth(edit.fontMetrics().horizontalAdvance("0000000000") + 12)
            edit.setToolTip(f"{LABELS[key]}: {range_hint(key)}")
            edit.textEdited.connect(lambda _text: self.show_error(None))
            hint = QLabel(range_hint(key))
            hint.setObjectName("hintLabel")
            row, column = i % rows, 4 * (i // rows)
            grid.addWidget(QLabel(LABELS[key]), row, column)
            grid.addWidget(edit, row, column + 1)
            grid.addWidget(hint, row, column + 2)
        grid.setColumnStretch(2, 1)
        grid.setColumnStretch(6, 1)
        layout.addLayout(grid)
        form = QFormLayout()
        self.stop = QPlainTextEdit()
        self.stop.setObjectName("stop")
        self.stop.setPlaceholderText("one per line; \\n for a newline")
        self.stop.setMaximumHeight(48)
        form.addRow(LABELS["stop"], self.stop)
        self.output_format = OutputFormatBox()
        form.addRow(LABELS["response_format"], self.output_format)
        # a reasoning model's thinking on/off, effort and budget: the settings panel's box
        self.reasoning = ReasoningBox(across=True)
        self.reasoning.setObjectName("reasoningDefaults")
        self.reasoning.changed.connect(lambda: self.show_error(None))
        form.addRow(REASONING_LABEL, self.reasoning)
        self.overflow = OverflowBox()
        self.overflow.changed.connect(lambda: self.show_error(None))
        form.addRow(LABELS["context_overflow"], self.overflow)
        layout.addLayout(form)
        layout.addLayout(self._engine_rows())
        layout.addLayout(self._files_rows(loaded))

        self.error = QLabel()
        self.error.setObjectName("errorLabel")
        self.error.setWordWrap(True)
        self.error.hide()
        layout.addWidget(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                   | QDialogButtonBox.StandardButton.Cancel
                                   | QDialogButtonBox.StandardButton.RestoreDefaults)
        self.save_button = buttons.button(QDialogButtonBox.StandardButton.Save)
        self.builtin_button = buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        self.builtin_button.setText("Built-in values")
        self.builtin_button.setToolTip("Put BatchChat's own defaults in the form (saved only "
                                       "with Save)")
        self.save_button.clicked.connect(lambda: self.save())
        self.builtin_button.clicked.connect(lambda: self.fill(Defaults()))
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.fill(settings.defaults)
        self.resize(640, self.sizeHint().height())

    def _engine_rows(self) -> QFormLayout:
        """The engine's own settings: they apply at a model load, not to new tabs."""
        heading = QLabel("Engine (applies at the next model load)")
        heading.setObjectName("dialogHeading")
        self.kv_bits = QComboBox()
        self.kv_bits.setObjectName("kvBits")
        for bits in kv.CHOICES:
            self.kv_bits.addItem(kv.label(bits), bits)
        self.kv_bits.setToolTip(KV_TIP)
        hint = QLabel("8-bit: 1.8–3.6× the tokens a MiB")
        hint.setObjectName("hintLabel")
        hint.setToolTip(KV_TIP)
        row = QGridLayout()
        row.addWidget(self.kv_bits, 0, 0)
        row.addWidget(hint, 0, 1)
        row.setColumnStretch(1, 1)
        form = QFormLayout()
        form.setContentsMargins(0, 6, 0, 0)  # apart from the defaults above: not a tab's
        form.addRow(heading)
        form.addRow(KV_LABEL, row)
        self.fill_kv_bits()
        return form

    def _files_rows(self, loaded: Sequence[str]) -> QFormLayout:
        """Chat with files: the model retrieval embeds with (applies to the next question)."""
        self.retrieval = RetrievalModelBox([s for s in loaded if usable(s)])
        self.retrieval.list_library(self.settings.model_folders)
        heading = QLabel("Chat with files (applies to the next question)")
        heading.setObjectName("dialogHeading")
        form = QFormLayout()
        form.setContentsMargins(0, 6, 0, 0)
        form.addRow(heading)
        form.addRow(RETRIEVAL_LABEL, self.retrieval)
        self.fill_retrieval()
        return form

    def fill_retrieval(self) -> None:
        """Show the saved retrieval model (nothing saved)."""
        self.retrieval.set_value(self.settings.retrieval_model)

    def fill_kv_bits(self) -> None:
        """Show the saved KV cache form (nothing saved)."""
        self.kv_bits.setCurrentIndex(self.kv_bits.findData(self.settings.kv_bits))

    # -- the form ---------------------------------------------------------------------
    def fill(self, defaults: Defaults) -> None:
        """Show `defaults` in the form (nothing saved)."""
        self.system.setPlainText(defaults.system_prompt)
        self.fill_params(defaults.params)

    def fill_params(self, params: dict[str, Any]) -> None:
        for key, edit in self.fields.items():
            edit.setText(describe(key, params.get(key, DEFAULT_PARAMS[key])))
        stop = params.get("stop") or []
        self.stop.setPlainText("\n".join(s.replace("\n", "\\n") for s in stop))
        self.output_format.set_value(params.get("response_format"))
        self.reasoning.set_value(params.get("reasoning"))
        self.overflow.set_value(params.get("context_overflow"))
        self.show_error(None)

    def values(self) -> Defaults:
        """The form as checked defaults; DefaultsError names the first value that is not."""
        params: dict[str, Any] = {key: parse_value(key, edit.text())
                                  for key, edit in self.fields.items()}
        lines = self.stop.toPlainText().splitlines()
        params["stop"] = [s.replace("\\n", "\n") for s in lines if s]
        params["response_format"] = self.output_format.value()
        params["reasoning"] = self.reasoning.value()
        params["context_overflow"] = self.overflow.value()
        return Defaults.make(self.system.toPlainText(), params)

    def save(self) -> bool:
        """Save the defaults and close; False (with the reason shown) if a value cannot be
        one, and then nothing is saved."""
        try:
            defaults = self.values()
        except DefaultsError as exc:
            self.show_error(str(exc), exc.key)
            return False
        self.settings.set_defaults(defaults.system_prompt, defaults.params)
        kv_changed = self.settings.set_kv_bits(self.kv_bits.currentData())
        self.settings.set_retrieval_model(self.retrieval.value())  # the next question's
        self.accept()
        if kv_changed and self._reload is not None:
            self._reload()  # None when no model is loaded: the next load takes it
        return True

    def show_error(self, text: str | None, key: str | None = None) -> None:
        self.error.setText(text or "")
        self.error.setVisible(bool(text))
        for name, edit in self.fields.items():
            bad = name == key
            if edit.property("invalid") != bad:
                edit.setProperty("invalid", bad)
                edit.style().unpolish(edit)  # the stylesheet's red border follows
                edit.style().polish(edit)
        if key in self.fields:
            self.fields[key].setFocus()
            self.fields[key].selectAll()

    # -- presets ----------------------------------------------------------------------
    def _fill_presets(self) -> None:
        self.preset.clear()
        self.preset.addItem(PICK_PRESET)
        self.preset.addItems(self.settings.preset_names())

    def _preset_chosen(self, index: int) -> None:
        if index > 0:
            self.fill_params(self.settings.preset(self.preset.itemText(index)))
        self.preset.setCurrentIndex(0)


def open_preferences(settings: Settings, parent: QWidget,
                     reload: Callable[[], object] | None = None,
                     loaded: Sequence[str] = ()) -> PreferencesDialog:
    """The window's one Preferences dialog, opened (raised if it is open already);
    `reload()` loads the model again when Save changed an engine setting; `loaded`: the
    sources of the models loaded now (offered for retrieval)."""
    dialog = parent.findChild(PreferencesDialog)
    if dialog is None:
        dialog = PreferencesDialog(settings, parent, reload, loaded)
    elif not dialog.isVisible():  # closed before: it shows the settings as saved now
        dialog.fill(settings.defaults)
        dialog.fill_kv_bits()
        dialog.fill_retrieval()
    dialog.open()  # never exec(): qasync runs this loop
    dialog.raise_()
    dialog.activateWindow()
    return dialog
