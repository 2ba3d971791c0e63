"""Per-tab system prompt and sampling settings, with named presets shared by all tabs."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QResizeEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.defaults import LABELS, LIMITS, DefaultsError, without_tools
from app.settings import Settings, normalize_params

from ..mcp.tools_box import ToolsBox
from ..widgets import double_box, int_box
from .output_format_box import OutputFormatBox
from .overflow_box import OverflowBox
from .reasoning_box import ReasoningBox

CUSTOM = "(custom)"
DEFAULTS = "(defaults)"  # no preset has the tab's settings; they are the defaults for new tabs
ACROSS, DOWN = QBoxLayout.Direction.LeftToRight, QBoxLayout.Direction.TopToBottom


def number_box(key: str) -> QDoubleSpinBox | QSpinBox:
    """A spin box for number setting `key`, within its limits (app/defaults.py)."""
    limit = LIMITS[key]
    if not limit.integer:
        return double_box(limit.lo, limit.hi, limit.step)
    # seed: -1 is shown as "random" (no seed)
    lo = -1 if key == "seed" else int(limit.lo)
    return int_box(lo, int(limit.hi), limit.special)


class SettingsPanel(QWidget):
    """`changed()` fires on every edit; read `system_prompt()` and `params()`.

    Each setting whose value differs from the app-wide defaults (Settings.defaults) is an
    override: its label is bold with a dot, its tooltip says the default, and its ↺ button
    puts the default back; "Reset all" does so for every setting, "Make defaults" makes the
    tab's settings the defaults for new tabs."""

    changed = Signal()

    def __init__(self, settings: Settings, system_prompt: str, params: dict[str, Any],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        self.settings = settings
        self._loading = False
        self.labels: dict[str, QLabel] = {}  # each setting's label, marked when overridden
        self.reset_buttons: dict[str, QToolButton] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 10)
        layout.addLayout(self._heading("system_prompt"))
        self.system = QPlainTextEdit()
        self.system.setObjectName("systemPrompt")
        self.system.setMaximumHeight(90)
        layout.addWidget(self.system)

        layout.addWidget(QLabel("Preset"))
        self.preset = QComboBox()
        self.preset.setMinimumContentsLength(8)
        self.save_preset_button = QPushButton("Save as preset…")
        self.save_preset_button.setToolTip("Save this tab's settings as a named preset, "
                                           "for any tab and the compare view")
        self.delete_preset_button = QPushButton("Delete")
        self.delete_preset_button.setToolTip("Delete this preset")
        self.preset_buttons = buttons = QBoxLayout(ACROSS)
        buttons.addWidget(self.save_preset_button)
        buttons.addWidget(self.delete_preset_button)
        buttons.addStretch(1)
        # the buttons beside the preset when there is room, under it when narrow, and under
        # each other when narrower still (resizeEvent)
        self.preset_row = QBoxLayout(DOWN)
        self.preset_row.addWidget(self.preset, 1)
        self.preset_row.addLayout(buttons)
        layout.addLayout(self.preset_row)
        layout.addLayout(self._defaults_row())

        # one policy for every row: labels beside their fields when all of them fit, else
        # every label above its field (resizeEvent); row by row, a narrow panel mixed both
        self.form = form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        self.fields: dict[str, QDoubleSpinBox | QSpinBox] = {}
        for name in LIMITS:
            box = self.fields[name] = number_box(name)
            box.setObjectName(name)
            form.addRow(self._label(name), self._with_reset(name, box))
            box.valueChanged.connect(self._edited)
        self.stop = QPlainTextEdit()
        self.stop.setObjectName("stop")
        self.stop.setPlaceholderText("one per line; \\n for a newline")
        self.stop.setMaximumHeight(60)
        form.addRow(self._label("stop"), self._with_reset("stop", self.stop))
        self.overflow = OverflowBox()
        self.overflow.changed.connect(self._edited)
        form.addRow(self._label("context_overflow"),
                    self._with_reset("context_overflow", self.overflow))
        layout.addLayout(form)
        layout.addLayout(self._heading("response_format"))
        self.output_format = OutputFormatBox()
        self.output_format.changed.connect(self._edited)
        layout.addWidget(self.output_format)
        layout.addLayout(self._heading("reasoning"))
        self.reasoning = ReasoningBox()
        self.reasoning.changed.connect(self._edited)
        layout.addWidget(self.reasoning)
        layout.addWidget(QLabel("Tools (MCP servers)"))
        self.tools = ToolsBox(settings)
        self.tools.changed.connect(self._edited)
        layout.addWidget(self.tools)
        self.error = QLabel()
        self.error.setObjectName("errorLabel")
        self.error.setWordWrap(True)
        self.error.hide()
        layout.addWidget(self.error)
        layout.addStretch(1)

        self.system.textChanged.connect(self._edited)
        self.stop.textChanged.connect(self._edited)
        self.preset.activated.connect(self._preset_chosen)
        self.save_preset_button.clicked.connect(self._ask_preset_name)
        self.delete_preset_button.clicked.connect(self._delete_preset)
        settings.presets_changed.connect(self._fill_presets)
        settings.defaults_changed.connect(self._defaults_changed)

        self._loading = True
        self.system.setPlainText(system_prompt)
        self.set_params(params)
        self._loading = False
        self._fill_presets()
        self._mark_overrides()

    # -- building -----------------------------------------------------------------------
    def _label(self, key: str) -> QLabel:
        label = self.labels[key] = QLabel(LABELS[key])
        label.setObjectName("settingLabel")
        return label

    def _reset_button(self, key: str) -> QToolButton:
        button = self.reset_buttons[key] = QToolButton()
        button.setObjectName("resetButton")
        button.setText("↺")
        button.setAutoRaise(True)
        policy = button.sizePolicy()
        policy.setRetainSizeWhenHidden(True)  # the fields do not jump as it comes and goes
        button.setSizePolicy(policy)
        button.clicked.connect(lambda _=False, k=key: self.reset(k))
        return button

    def _with_reset(self, key: str, field: QWidget) -> QHBoxLayout:
        row = QHBoxLayout()
        row.setSpacing(2)
        row.addWidget(field, 1)
        row.addWidget(self._reset_button(key), 0, Qt.AlignmentFlag.AlignTop)
        return row

    def _heading(self, key: str) -> QHBoxLayout:
        """A label above a wide setting, with its ↺ at the end."""
        row = QHBoxLayout()
        row.addWidget(self._label(key))
        row.addStretch(1)
        row.addWidget(self._reset_button(key))
        return row

    def _defaults_row(self) -> QVBoxLayout:
        """How many settings differ from the defaults, and the buttons for all of them."""
        box = QVBoxLayout()
        self.overrides_label = QLabel()
        self.overrides_label.setObjectName("hintLabel")
        self.overrides_label.setWordWrap(True)
        self.reset_all_button = QPushButton("Reset all")
        self.reset_all_button.setToolTip("Put every setting back to the defaults for new "
                                         "tabs (Chat → Preferences…)")
        self.reset_all_button.clicked.connect(lambda: self.reset_all())
        self.make_defaults_button = QPushButton("Make defaults")
        self.make_defaults_button.setToolTip("New tabs start with this tab's settings from "
                                             "now on (Chat → Preferences… shows them)")
        self.make_defaults_button.clicked.connect(lambda: self.make_defaults())
        self.defaults_buttons = row = QBoxLayout(ACROSS)  # under each other when narrow
        row.addWidget(self.reset_all_button)
        row.addWidget(self.make_defaults_button)
        row.addStretch(1)
        box.addWidget(self.overrides_label)
        box.addLayout(row)
        return box

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        width = event.size().width()
        save, delete = self.save_preset_button, self.delete_preset_button
        for row, widgets in ((self.preset_row, (self.preset, save, delete)),
                             (self.preset_buttons, (save, delete)),
                             (self.defaults_buttons,
                              (self.reset_all_button, self.make_defaults_button))):
            direction = ACROSS if width >= self._room_for(widgets) else DOWN
            if row.direction() != direction:
                row.setDirection(direction)
        policy = (QFormLayout.RowWrapPolicy.DontWrapRows if width >= self._form_room()
                  else QFormLayout.RowWrapPolicy.WrapAllRows)
        if self.form.rowWrapPolicy() != policy:
            self.form.setRowWrapPolicy(policy)

    def _form_room(self) -> int:
        """The width that shows every label beside its field: the widest label, bold and
        marked "•" as when overridden (so the layout does not flip as marks come and go),
        a number field and its ↺."""
        margins = self.layout().contentsMargins()
        bold = QFont(self.font())
        bold.setBold(True)
        metrics = QFontMetrics(bold)
        widest = max(metrics.horizontalAdvance(f"{LABELS[key]} •") for key in self.labels)
        field = max(box.sizeHint().width() for box in self.fields.values())
        reset = max(b.sizeHint().width() for b in self.reset_buttons.values())
        return (widest + self.form.horizontalSpacing() + field + 2 + reset
                + margins.left() + margins.right())

    def _room_for(self, widgets: tuple[QWidget, ...]) -> int:
        """The width that shows `widgets` side by side, whole."""
        margins = self.layout().contentsMargins()
        return (sum(w.sizeHint().width() for w in widgets) + 8 * (len(widgets) - 1)
                + margins.left() + margins.right())

    def detach(self) -> None:
        """Stop listening to the shared settings (the tab is closing)."""
        self.settings.presets_changed.disconnect(self._fill_presets)
        self.settings.defaults_changed.disconnect(self._defaults_changed)
        self.tools.detach()

    # -- reading and writing ------------------------------------------------------------
    def system_prompt(self) -> str:
        return self.system.toPlainText()

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: box.value() for name, box in self.fields.items()}
        out["seed"] = None if out["seed"] < 0 else out["seed"]
        lines = self.stop.toPlainText().splitlines()
        out["stop"] = [s.replace("\\n", "\n") for s in lines if s]
        out["response_format"] = self.output_format.value()
        out["reasoning"] = self.reasoning.value()
        out["context_overflow"] = self.overflow.value()
        out |= self.tools.params()
        return normalize_params(out)

    def set_params(self, params: dict[str, Any]) -> None:
        was, self._loading = self._loading, True
        p = normalize_params(params)
        for name, box in self.fields.items():
            value = p[name]
            box.setValue(-1 if value is None else value)
        self.stop.setPlainText("\n".join(s.replace("\n", "\\n") for s in p["stop"]))
        self.output_format.set_value(p.get("response_format"))
        self.reasoning.set_value(p.get("reasoning"))
        self.overflow.set_value(p.get("context_overflow"))
        self.tools.set_params(p)
        self._loading = was
        if not was:
            self._edited()

    def show_error(self, text: str | None) -> None:
        self.error.setText(text or "")
        self.error.setVisible(bool(text))

    # -- presets ------------------------------------------------------------------------
    def _fill_presets(self) -> None:
        current = self.params()
        self.preset.blockSignals(True)
        self.preset.clear()
        self.preset.addItems(self.settings.preset_names())
        match = self.settings.matching_preset(current)  # the tab's tools aside
        if match is None:
            match = CUSTOM if self.overrides() else DEFAULTS
            self.preset.addItem(match)
        self.preset.setCurrentText(match)
        self.preset.blockSignals(False)
        name = self.preset_name()
        self.delete_preset_button.setEnabled(
            name is not None and not self.settings.is_builtin(name))

    def preset_name(self) -> str | None:
        """The preset the tab's settings are (None: no preset)."""
        name = self.preset.currentText()
        return None if name in (CUSTOM, DEFAULTS) else name

    def _preset_chosen(self, _index: int) -> None:
        name = self.preset_name()
        if name is not None:
            self.set_params(self.settings.preset(name) | self.tools.params())

    def _ask_preset_name(self) -> None:
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Save preset")
        dialog.setLabelText("Preset name:")
        dialog.textValueSelected.connect(self.save_preset)
        dialog.open()  # never exec(): we run inside qasync's loop

    def save_preset(self, name: str) -> None:
        try:
            self.settings.save_preset(name, without_tools(self.params()))
        except ValueError as exc:
            self.show_error(str(exc))

    def _delete_preset(self) -> None:
        name = self.preset_name()
        if name is not None and not self.settings.is_builtin(name):
            self.settings.delete_preset(name)

    # -- overrides of the defaults ------------------------------------------------------
    def overrides(self) -> dict[str, str]:
        """The settings this tab has its own value for: key -> the default, in words."""
        return self.settings.defaults.overrides(self.system_prompt(), self.params())

    def reset(self, key: str) -> None:
        """Setting `key` back to its default."""
        value = self.settings.defaults.value(key)
        if key == "system_prompt":
            self.system.setPlainText(value)
        else:
            self.set_params(self.params() | {key: value})

    def reset_all(self) -> None:
        """Every setting back to the defaults (the tab's tools stay)."""
        defaults = self.settings.defaults
        self._loading = True
        self.system.setPlainText(defaults.system_prompt)
        self._loading = False
        self.set_params(dict(defaults.params) | self.tools.params())

    def make_defaults(self) -> None:
        """New tabs start with this tab's settings (its tools aside)."""
        try:
            self.settings.set_defaults(self.system_prompt(), self.params())
        except DefaultsError as exc:
            self.show_error(str(exc))

    def _defaults_changed(self) -> None:
        self._fill_presets()
        self._mark_overrides()

    def _mark_overrides(self) -> None:
        overrides = self.overrides()
        for key, label in self.labels.items():
            default = overrides.get(key)
            label.setText(LABELS[key] + (" •" if default is not None else ""))
            label.setToolTip("" if default is None else
                             f"default: {default} (this tab has its own value)")
            if label.property("override") != (default is not None):
                label.setProperty("override", default is not None)
                label.style().unpolish(label)  # the stylesheet's bold follows the property
                label.style().polish(label)
            button = self.reset_buttons[key]
            button.setVisible(default is not None)
            button.setToolTip(f"Back to the default: {default}" if default else "")
        count = len(overrides)
        self.overrides_label.setText(
            "Same as the defaults for new tabs." if not count else
            f"{count} setting{'s' if count > 1 else ''} differ{'' if count > 1 else 's'} "
            "from the defaults •")
        self.reset_all_button.setEnabled(bool(count))
        self.make_defaults_button.setEnabled(bool(count))

    def _edited(self) -> None:
        if self._loading:
            return
        self._fill_presets()
        self._mark_overrides()
        self.changed.emit()
