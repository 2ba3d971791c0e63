"""A push button whose drop-down menu is made the first time it opens.

Why: every chat message has one or two (Copy's, "⋯"), a menu is a top-level widget of its
own (~20 KiB), and a long session's window keeps hundreds of messages (issue #46 item 14,
docs/memory.md) whose menus are almost never opened. The button is drawn and sized as one
with a menu from the start (the style's menu indicator), so nothing on screen changes when
the menu is made."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QKeyEvent, QMouseEvent, QPaintEvent
from PySide6.QtWidgets import (
    QMenu,
    QPushButton,
    QStyle,
    QStyleOptionButton,
    QStylePainter,
    QWidget,
)

# the keys that open a push button's menu (QAbstractButton: Space; QPushButton: Enter too)
OPENING_KEYS = (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Select)


class MenuButton(QPushButton):
    """`make_menu(button)` fills and returns the button's menu; it runs once, when the menu
    is first wanted: a press, a key, or `ensure_menu()` (what reads the menu's actions)."""

    def __init__(self, text: str, make_menu: Callable[[QPushButton], QMenu],
                 parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self._make_menu = make_menu

    def ensure_menu(self) -> QMenu:
        menu = self.menu()
        if menu is None:
            menu = self._make_menu(self)
            self.setMenu(menu)
        return menu

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        if event.button() == Qt.MouseButton.LeftButton:
            self.ensure_menu()  # made before the press: the press then opens it
        super().mousePressEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        if event.key() in OPENING_KEYS:
            self.ensure_menu()
        super().keyPressEvent(event)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        if self.menu() is not None:
            super().paintEvent(event)
            return
        painter = QStylePainter(self)
        painter.drawControl(QStyle.ControlElement.CE_PushButton, self._option())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        if self.menu() is not None:
            return super().sizeHint()
        # as QPushButton::sizeHint sizes a text button with a menu: the text, widened by
        # the indicator, then the style's margins and minimum (no icon on these buttons)
        self.ensurePolished()
        option = self._option()
        text = self.fontMetrics().size(Qt.TextFlag.TextShowMnemonic, self.text() or "XXXX")
        option.rect.setSize(text)  # (the indicator's width depends on the height)
        width = text.width() + self.style().pixelMetric(
            QStyle.PixelMetric.PM_MenuButtonIndicator, option, self)
        return self.style().sizeFromContents(QStyle.ContentsType.CT_PushButton, option,
                                             QSize(width, text.height()), self)

    def _option(self) -> QStyleOptionButton:
        option = QStyleOptionButton()
        self.initStyleOption(option)
        option.features |= QStyleOptionButton.ButtonFeature.HasMenu
        return option
