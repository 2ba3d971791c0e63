"""One tool call in a reply, as a collapsible block: the tool's name and status in its
header; its arguments and result inside; Allow / Deny and "Always allow this tool" while it
waits for the user."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

STATUS = {"pending": "waiting for you", "running": "running …", "done": "done",
          "failed": "failed", "denied": "denied"}


def pretty(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return arguments


class ToolCallBlock(QFrame):
    """`decided(call_id, allow, always)` when the user answers."""

    decided = Signal(str, bool, bool)

    def __init__(self, call: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolCallBlock")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.call_id = call["id"]
        self.name = call["function"]["name"]
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 6)
        layout.setSpacing(4)
        self.toggle = QToolButton()
        self.toggle.setObjectName("toolCallToggle")
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAutoRaise(True)
        self.toggle.toggled.connect(self._expand)
        layout.addWidget(self.toggle)
        self.details = QWidget()
        inner = QVBoxLayout(self.details)
        inner.setContentsMargins(18, 0, 0, 0)
        self.arguments = QLabel()
        self.arguments.setObjectName("toolArguments")
        self.arguments.setWordWrap(True)
        self.arguments.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.arguments.setTextFormat(Qt.TextFormat.PlainText)
        self.result = QLabel()
        self.result.setObjectName("toolResult")
        self.result.setWordWrap(True)
        self.result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.result.setTextFormat(Qt.TextFormat.PlainText)
        inner.addWidget(QLabel("Arguments"))
        inner.addWidget(self.arguments)
        self.result_title = QLabel("Result")
        inner.addWidget(self.result_title)
        inner.addWidget(self.result)
        layout.addWidget(self.details)
        self.ask = QWidget()
        row = QHBoxLayout(self.ask)
        row.setContentsMargins(0, 0, 0, 0)
        self.allow_button = QPushButton("Allow")
        self.allow_button.setObjectName("toolAllow")
        self.deny_button = QPushButton("Deny")
        self.deny_button.setObjectName("toolDeny")
        self.always = QCheckBox("Always allow this tool")
        self.always.setToolTip("In this tab, run this tool's calls without asking")
        row.addWidget(self.allow_button)
        row.addWidget(self.deny_button)
        row.addWidget(self.always)
        row.addStretch(1)
        layout.addWidget(self.ask)
        self.allow_button.clicked.connect(
            lambda: self.decided.emit(self.call_id, True, self.always.isChecked()))
        self.deny_button.clicked.connect(lambda: self.decided.emit(self.call_id, False, False))
        self.arguments.setText(pretty(call["function"]["arguments"]))
        self._status = ""
        self.toggle.setChecked(True)  # open while it asks; closes once it has a result

    def update_outcome(self, outcome: dict[str, str] | None) -> None:
        status = (outcome or {}).get("status", "pending")
        text = (outcome or {}).get("text", "")
        self.toggle.setText(f"Tool call: {self.name} — {STATUS.get(status, status)}")
        self.ask.setVisible(status == "pending")
        self.result_title.setVisible(bool(text))
        self.result.setVisible(bool(text))
        self.result.setText(text)
        self.setProperty("failed", "true" if status in ("failed", "denied") else "false")
        # a result folds, a failure stays open: as it arrives, or when a reopened chat
        # shows it (the block's first outcome)
        if status != self._status and status in ("done", "failed", "denied") \
                and self._status in ("", "pending", "running"):
            self.toggle.setChecked(status != "done")
        self._status = status

    def _expand(self, shown: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self.details.setVisible(shown)
