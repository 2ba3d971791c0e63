"""The Preferences dialog: the defaults for new tabs (system prompt, sampling, stop strings,
output format), typed and checked by app/defaults.py before anything is saved."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

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

INTRO = ("New tabs start with these settings. Open tabs keep their own; a tab's settings "
         "panel marks each value that differs from these with •.")
PICK_PRESET = "Fill in from a preset…"


def range_hint(key: str) -> str:
    """What setting `key` takes, beside its field: "0 – 5", "off or 1 – 100000"."""
    limit = LIMITS[key]
    lo = int(limit.lo) if limit.integer else limit.lo
    span = f"{lo:g} – {limit.hi:g}" if not limit.integer else f"{lo} – {int(limit.hi)}"
    return f"{span}, or {limit.special}" if limit.special else span


class PreferencesDialog(QDialog):
    """Shows the saved defaults; Save checks every value first and saves nothing (with the
    reason, at the field) when one cannot be a default."""

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Preferences")
        self.setObjectName("preferencesDialog")
        self.settings = settings
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

        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.system = QPlainTextEdit()
        self.system.setObjectName("systemPrompt")
        self.system.setMaximumHeight(80)
        form.addRow(LABELS["system_prompt"], self.system)
        self.fields: dict[str, QLineEdit] = {}
        for key in LIMITS:
            edit = self.fields[key] = QLineEdit()
            edit.setObjectName(key)
            edit.textEdited.connect(lambda _text: self.show_error(None))
            hint = QLabel(range_hint(key))
            hint.setObjectName("hintLabel")
            row = QHBoxLayout()
            row.addWidget(edit, 1)
            row.addWidget(hint)
            form.addRow(LABELS[key], row)
        self.stop = QPlainTextEdit()
        self.stop.setObjectName("stop")
        self.stop.setPlaceholderText("one per line; \\n for a newline")
        self.stop.setMaximumHeight(56)
        form.addRow(LABELS["stop"], self.stop)
        self.output_format = OutputFormatBox()
        form.addRow(LABELS["response_format"], self.output_format)
        layout.addLayout(form)

        self.error = QLabel()
        self.error.setObjectName("errorLabel")
        self.error.setWordWrap(True)
        self.error.hide()
        layout.addWidget(self.error)
        layout.addStretch(1)
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
        self.resize(520, 640)

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
        self.show_error(None)

    def values(self) -> Defaults:
        """The form as checked defaults; DefaultsError names the first value that is not."""
        params: dict[str, Any] = {key: parse_value(key, edit.text())
                                  for key, edit in self.fields.items()}
        lines = self.stop.toPlainText().splitlines()
        params["stop"] = [s.replace("\\n", "\n") for s in lines if s]
        params["response_format"] = self.output_format.value()
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
        self.accept()
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


def open_preferences(settings: Settings, parent: QWidget) -> PreferencesDialog:
    """The window's one Preferences dialog, opened (raised if it is open already)."""
    dialog = parent.findChild(PreferencesDialog)
    if dialog is None:
        dialog = PreferencesDialog(settings, parent)
    elif not dialog.isVisible():  # closed before: it shows the defaults as saved now
        dialog.fill(settings.defaults)
    dialog.open()  # never exec(): qasync runs this loop
    dialog.raise_()
    dialog.activateWindow()
    return dialog
