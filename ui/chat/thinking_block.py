"""A reasoning model's thinking above its answer (issue #49): a folded block whose header
says "Thinking…" while the reply thinks and "Thought for 12 s · 830 tokens" once it has
answered; opened, it shows the thinking as plain text (never mixed into the answer's
Markdown, its copy or its export)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QToolButton, QVBoxLayout, QWidget

from app.plural import counted


def thinking_title(live: bool, seconds: float | None, tokens: int | None) -> str:
    """The block's header: "Thinking…" while it thinks, then how long and how much."""
    if live:
        return "Thinking…"
    bits = ["Thought"]
    if seconds is not None:
        bits[0] += f" for {seconds:.0f} s" if seconds >= 1 else " for under a second"
    if tokens:
        bits.append(counted(tokens, "token"))
    return " · ".join(bits)


class ThinkingBlock(QFrame):
    """Folded by default; its toggle opens and closes it (the choice kept while the reply
    streams and re-renders)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("thinkingBlock")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 2, 8, 4)
        layout.setSpacing(2)
        self.toggle = QToolButton()
        self.toggle.setObjectName("thinkingToggle")
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setToolTip("Show or hide the model's thinking")
        self.toggle.toggled.connect(self._fold)
        layout.addWidget(self.toggle)
        self.text = QLabel()
        self.text.setObjectName("thinkingText")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.PlainText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setVisible(False)
        layout.addWidget(self.text)
        self.setVisible(False)

    @property
    def folded(self) -> bool:
        return not self.toggle.isChecked()

    def show_thinking(self, text: str, *, live: bool, seconds: float | None = None,
                      tokens: int | None = None) -> None:
        """The thinking so far (`live`: still thinking); hidden while there is none."""
        self.setVisible(bool(text) or live)
        if text != self.text.text():
            self.text.setText(text)
        title = thinking_title(live, seconds, tokens)
        if title != self.toggle.text():
            self.toggle.setText(title)

    def _fold(self, opened: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if opened else Qt.ArrowType.RightArrow)
        self.text.setVisible(opened)
