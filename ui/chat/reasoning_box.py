"""A tab's reasoning setting in its settings panel (issue #49): thinking as the model does
by default, on or off; its effort; a thinking budget in tokens (kept in the tab's params as
`reasoning`, app/reasoning/setting.py). A model that does not think ignores it."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFormLayout, QHBoxLayout, QLabel, QSpinBox, QWidget

from app.reasoning.setting import MAX_BUDGET, check

THINKING = (("Model default", None), ("On", "on"), ("Off", "off"))
EFFORT = (("Model default", None), ("None", "none"), ("Low", "low"), ("Medium", "medium"),
          ("High", "high"))
NO_LIMIT = "no limit"


class ReasoningBox(QWidget):
    """`changed()` on every edit; `value()` is the setting (None: the model's way).
    `across`: the three side by side on one line (Preferences, which must fit a 600-pixel
    window), else one under the other (the settings panel's column)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None, *, across: bool = False) -> None:
        super().__init__(parent)
        self.thinking = QComboBox()
        self.thinking.setObjectName("thinkingSwitch")
        for text, value in THINKING:
            self.thinking.addItem(text, value)
        self.thinking.setToolTip("Whether a reasoning model thinks before it answers")
        self.effort = QComboBox()
        self.effort.setObjectName("thinkingEffort")
        for text, value in EFFORT:
            self.effort.addItem(text, value)
        self.effort.setToolTip("How hard it thinks (reasoning_effort); None turns thinking "
                               "off where the model can stop")
        self.budget = QSpinBox()
        self.budget.setObjectName("thinkingBudget")
        self.budget.setRange(-1, MAX_BUDGET)
        self.budget.setSpecialValueText(NO_LIMIT)
        self.budget.setSuffix(" tokens")
        self.budget.setToolTip("At most this many tokens of thinking, then the answer")
        rows = (("Thinking", self.thinking), ("Effort", self.effort), ("Budget", self.budget))
        if across:
            line = QHBoxLayout(self)
            line.setContentsMargins(0, 0, 0, 0)
            for label, field in rows:
                line.addWidget(QLabel(label))
                line.addWidget(field, 1)
        else:
            form = QFormLayout(self)
            form.setContentsMargins(0, 0, 0, 0)
            for label, field in rows:
                form.addRow(label, field)
        self.thinking.currentIndexChanged.connect(self._edited)
        self.effort.currentIndexChanged.connect(self._edited)
        self.budget.valueChanged.connect(self._edited)
        self._loading = False
        self.set_value(None)

    def value(self) -> dict[str, Any] | None:
        budget = self.budget.value()
        return check({"thinking": self.thinking.currentData(),
                      "effort": self.effort.currentData(),
                      "budget": None if budget < 0 else budget})

    def set_value(self, value: Any) -> None:
        self._loading = True
        kept = value if isinstance(value, dict) else {}
        self.thinking.setCurrentIndex(max(0, self.thinking.findData(kept.get("thinking"))))
        self.effort.setCurrentIndex(max(0, self.effort.findData(kept.get("effort"))))
        budget = kept.get("budget")
        self.budget.setValue(budget if isinstance(budget, int) else -1)
        self._loading = False

    def _edited(self) -> None:
        if not self._loading:
            self.changed.emit()
