"""The compare view's target rows: each a combo of "Local · <preset>", saved connections and
the library's other models (issue #50: loaded before the message is sent)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.conversation import MAX_ANSWERS, ReplyTarget
from app.settings import Settings

MIN_TARGETS = 2
MAX_TARGETS = MAX_ANSWERS
TAB_SETTINGS = "Local · this tab's settings"


def target_choices(settings: Settings, tab_params: dict[str, Any],
                   tab_preset: str | None, models: list[str] | None = None) -> list[ReplyTarget]:
    """What a row offers: the local engine with the tab's settings (when they are no
    preset), with each preset, then each saved connection, then each of the library's
    other `models` (both with the tab's settings)."""
    out: list[ReplyTarget] = []
    if tab_preset not in settings.preset_names():
        out.append(ReplyTarget(None, dict(tab_params), TAB_SETTINGS))
    out += [ReplyTarget(None, settings.preset(name), f"Local · {name}")
            for name in settings.preset_names()]
    out += [ReplyTarget(conn.name, dict(tab_params), conn.name)
            for conn in settings.connections]
    out += [ReplyTarget(None, dict(tab_params), f"{model} · this tab's settings", model=model)
            for model in models or ()]
    return out


def describe(target: ReplyTarget, settings: Settings) -> str:
    """A target's settings in one short line, so rows that differ show how."""
    p = target.params
    parts = [f"temperature {p.get('temperature', 0):g}"]
    if p.get("temperature", 0) > 0:
        parts.append(f"top p {p.get('top_p', 1):g}")
    parts.append(f"max {p.get('max_tokens')} tokens")
    if p.get("seed") is not None:
        parts.append(f"seed {p['seed']}")
    conn = settings.connection(target.backend) if target.backend is not None else None
    if conn is not None:
        parts.insert(0, conn.describe())
    elif target.model is not None:
        parts.insert(0, target.model)
    return " · ".join(parts)


class TargetRow(QWidget):
    """One target: a combo and a remove button."""

    remove_requested = Signal(object)

    def __init__(self, choices: list[ReplyTarget], index: int, settings: Settings,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.combo = QComboBox()
        self.combo.setObjectName("compareTarget")
        self.combo.setMinimumContentsLength(18)
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        for target in choices:
            self.combo.addItem(target.label, target)
        self.combo.setCurrentIndex(index % max(1, len(choices)))
        self.summary = QLabel()
        self.summary.setObjectName("statsLabel")
        self.combo.currentIndexChanged.connect(
            lambda _i: self.summary.setText(describe(self.target, settings)))
        self.summary.setText(describe(self.target, settings))
        self.remove_button = QPushButton("Remove")
        self.remove_button.setObjectName("flatButton")
        self.remove_button.setToolTip("Compare one target fewer")
        self.remove_button.clicked.connect(lambda: self.remove_requested.emit(self))
        layout.addWidget(self.combo)
        layout.addWidget(self.summary)
        layout.addWidget(self.remove_button)
        layout.addStretch(1)

    @property
    def target(self) -> ReplyTarget:
        return self.combo.currentData()


class TargetList(QWidget):
    """2 to MAX_TARGETS rows; the first starts on the tab's own settings, the next ones on
    the next choices (other presets, then connections)."""

    def __init__(self, choices: list[ReplyTarget], settings: Settings, first: int = 0,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.choices = choices
        self.settings = settings
        self._next = first
        self.rows: list[TargetRow] = []
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(4)
        self.add_button = QPushButton("Add target")
        self.add_button.setToolTip(f"Compare up to {MAX_TARGETS} targets")
        self.add_button.clicked.connect(self.add_row)
        add_row = QHBoxLayout()
        add_row.addWidget(self.add_button)
        add_row.addStretch(1)
        self._layout.addLayout(add_row)
        for _ in range(MIN_TARGETS):
            self.add_row()

    def add_row(self) -> TargetRow | None:
        if len(self.rows) >= MAX_TARGETS:
            return None
        row = TargetRow(self.choices, self._next, self.settings)
        self._next += 1
        row.remove_requested.connect(self.remove_row)
        self._layout.insertWidget(len(self.rows), row)
        self.rows.append(row)
        self._update()
        return row

    def remove_row(self, row: TargetRow) -> None:
        if len(self.rows) <= MIN_TARGETS or row not in self.rows:
            return
        self.rows.remove(row)
        row.setParent(None)
        row.deleteLater()
        self._update()

    def targets(self) -> list[ReplyTarget]:
        return [row.target for row in self.rows]

    def _update(self) -> None:
        self.add_button.setEnabled(len(self.rows) < MAX_TARGETS)
        for row in self.rows:
            row.remove_button.setEnabled(len(self.rows) > MIN_TARGETS)
            row.remove_button.setVisible(len(self.rows) > MIN_TARGETS)
