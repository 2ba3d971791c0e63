"""Per-tab system prompt and sampling settings, with named presets shared by all tabs."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QResizeEvent
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
    QVBoxLayout,
    QWidget,
)

from app.settings import Settings, normalize_params

from ..mcp.tools_box import ToolsBox
from ..widgets import double_box, int_box
from .output_format_box import OutputFormatBox

CUSTOM = "(custom)"
TOOL_KEYS = ("mcp_servers", "tool_choice")  # the tab's tools: kept out of presets
# from this width the Save as… / Delete buttons fit beside the preset (else under it)
PRESET_ROW_WIDE = 300


class SettingsPanel(QWidget):
    """`changed()` fires on every edit; read `system_prompt()` and `params()`."""

    changed = Signal()

    def __init__(self, settings: Settings, system_prompt: str, params: dict[str, Any],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("settingsPanel")
        self.settings = settings
        self._loading = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 10)
        layout.addWidget(QLabel("System prompt"))
        self.system = QPlainTextEdit()
        self.system.setObjectName("systemPrompt")
        self.system.setMaximumHeight(90)
        layout.addWidget(self.system)

        layout.addWidget(QLabel("Preset"))
        self.preset = QComboBox()
        self.preset.setMinimumContentsLength(8)
        self.save_preset_button = QPushButton("Save as…")
        self.delete_preset_button = QPushButton("Delete")
        buttons = QHBoxLayout()
        buttons.addWidget(self.save_preset_button)
        buttons.addWidget(self.delete_preset_button)
        buttons.addStretch(1)
        # the buttons beside the preset when there is room, under it when narrow (resizeEvent)
        self.preset_row = QBoxLayout(QBoxLayout.Direction.TopToBottom)
        self.preset_row.addWidget(self.preset, 1)
        self.preset_row.addLayout(buttons)
        layout.addLayout(self.preset_row)

        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)  # narrow: label above
        self.fields: dict[str, QDoubleSpinBox | QSpinBox] = {
            "temperature": double_box(0.0, 5.0, 0.05),
            "top_p": double_box(0.01, 1.0, 0.01),
            "top_k": int_box(0, 100_000, "off"),
            "min_p": double_box(0.0, 0.99, 0.01),
            "repetition_penalty": double_box(0.1, 3.0, 0.05),
            "max_tokens": int_box(1, 1_000_000),
            "seed": int_box(-1, 2**31 - 1, "random"),
        }
        for name, box in self.fields.items():
            box.setObjectName(name)
            form.addRow(name.replace("_", " ").capitalize(), box)
            box.valueChanged.connect(self._edited)
        self.stop = QPlainTextEdit()
        self.stop.setObjectName("stop")
        self.stop.setPlaceholderText("one per line; \\n for a newline")
        self.stop.setMaximumHeight(60)
        form.addRow("Stop strings", self.stop)
        layout.addLayout(form)
        layout.addWidget(QLabel("Output format"))
        self.output_format = OutputFormatBox()
        self.output_format.changed.connect(self._edited)
        layout.addWidget(self.output_format)
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

        self._loading = True
        self.system.setPlainText(system_prompt)
        self.set_params(params)
        self._loading = False
        self._fill_presets()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        wide = event.size().width() >= PRESET_ROW_WIDE
        direction = QBoxLayout.Direction.LeftToRight if wide else \
            QBoxLayout.Direction.TopToBottom
        if self.preset_row.direction() != direction:
            self.preset_row.setDirection(direction)

    def detach(self) -> None:
        """Stop listening to the shared settings (the tab is closing)."""
        self.settings.presets_changed.disconnect(self._fill_presets)
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
        # the tab's tools are its own, not a preset's
        current = {k: v for k, v in current.items() if k not in TOOL_KEYS}
        match = next((n for n in self.settings.preset_names()
                      if self.settings.preset(n) == current), None)
        if match is None:
            self.preset.addItem(CUSTOM)
            match = CUSTOM
        self.preset.setCurrentText(match)
        self.preset.blockSignals(False)
        self.delete_preset_button.setEnabled(
            match != CUSTOM and not self.settings.is_builtin(match))

    def _preset_chosen(self, _index: int) -> None:
        name = self.preset.currentText()
        if name != CUSTOM:
            self.set_params(self.settings.preset(name) | self.tools.params())

    def _ask_preset_name(self) -> None:
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Save preset")
        dialog.setLabelText("Preset name:")
        dialog.textValueSelected.connect(self.save_preset)
        dialog.open()  # never exec(): we run inside qasync's loop

    def save_preset(self, name: str) -> None:
        try:
            self.settings.save_preset(name, {k: v for k, v in self.params().items()
                                             if k not in TOOL_KEYS})
        except ValueError as exc:
            self.show_error(str(exc))

    def _delete_preset(self) -> None:
        name = self.preset.currentText()
        if name != CUSTOM and not self.settings.is_builtin(name):
            self.settings.delete_preset(name)

    def _edited(self) -> None:
        if self._loading:
            return
        self._fill_presets()
        self.changed.emit()
