"""A tab's context overflow policy in its settings panel and in Preferences (issue #53):
what happens when the chat outgrows the model's context (app/request/overflow.py)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QWidget

from app.request.overflow import WORDS, Policy, setting

TIPS = {Policy.STOP: "Refuse a message once the chat no longer fits the context",
        Policy.TRUNCATE_MIDDLE: "Keep the system prompt, the first exchange and the latest "
                                "ones; leave whole older messages out of the prompt",
        Policy.ROLLING_WINDOW: "Keep the system prompt and the latest messages; leave the "
                               "oldest whole messages out of the prompt"}


class OverflowBox(QComboBox):
    """`changed()` on every pick; `value()` is the tab's setting (None: stop)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("contextOverflow")
        for i, (policy, words) in enumerate(WORDS.items()):
            self.addItem(words, policy.value)
            self.setItemData(i, TIPS[policy], Qt.ItemDataRole.ToolTipRole)
        self.setToolTip("When the chat outgrows the model's context (the dropped messages "
                        "stay in the chat; only the prompt leaves them out)")
        self.currentIndexChanged.connect(lambda _i: self.changed.emit())

    def value(self) -> str | None:
        return setting(self.currentData())

    def set_value(self, value: object) -> None:
        try:
            policy = setting(value) or Policy.STOP.value
        except ValueError:
            policy = Policy.STOP.value
        self.setCurrentIndex(max(0, self.findData(policy)))
