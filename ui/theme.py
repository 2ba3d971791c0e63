"""Light and dark looks: follow the OS (Qt 6's colour scheme) unless the user picked one.

The dark stylesheet is the light one with its colours mapped (one file to keep), and a
matching palette covers the widgets the stylesheet leaves alone."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup, QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QMenu, QWidget

from .style import load_stylesheet

CHOICES = ("system", "light", "dark")

# light colour -> dark colour, for every colour in resources/stylesheet.qss
DARK_COLOURS = {
    "#ffffff": "#23262b", "#1a73e8": "#8ab4f8", "#e8f0fe": "#2b3a55", "#e3e6ea": "#3a3f46",
    "#fdecea": "#4a2a28", "#f6f7f9": "#1b1d21", "#f5c2bd": "#6b3a36", "#d93025": "#e06055",
    "#d2e0fb": "#3b4f73", "#cfd4da": "#4a4f57", "#b42318": "#f28b82", "#5f6368": "#a8adb3",
    "#fff8e1": "#3d3520", "#fff4e5": "#3d3220", "#f5d9a8": "#6b5a34", "#f3e1a6": "#6b5f34",
    "#f1f3f4": "#2f3338", "#a0a4a8": "#6b7076", "#9aa0a6": "#80868b", "#8a1c12": "#f6aea9",
    "#6d4c00": "#f0d58a", "#6b7280": "#9aa0a6", "#3c4043": "#e3e6ea", "#1765cc": "#aecbfa",
    "#f1f3f6": "#2a2e34",  # a code block (ui/chat/markdown_view.py's CODE_BACKGROUND)
}
DARK_SEND_TEXT = "#1b1d21"  # text on the light-blue Send button in the dark look


class Theme(QObject):
    """The app's look. `dark` says which one is showing; `changed(dark)` listeners are
    called after a switch (views with their own colours redraw)."""

    def __init__(self, app: QApplication, choice: str = "system",
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.app = app
        self.choice = choice if choice in CHOICES else "system"
        self.dark: bool | None = None
        self.listeners: list[Callable[[bool], object]] = []
        # a bound slot: Qt drops the connection when this object (the window's) goes
        app.styleHints().colorSchemeChanged.connect(self._scheme_changed)
        self.apply()

    def _scheme_changed(self, _scheme: Qt.ColorScheme) -> None:
        self.apply()

    def set_choice(self, choice: str) -> None:
        self.choice = choice if choice in CHOICES else "system"
        self.apply()

    def system_is_dark(self) -> bool:
        return self.app.styleHints().colorScheme() == Qt.ColorScheme.Dark

    def apply(self) -> None:
        dark = self.system_is_dark() if self.choice == "system" else self.choice == "dark"
        if dark == self.dark:
            return
        self.dark = dark
        self.app.setPalette(dark_palette() if dark else self.app.style().standardPalette())
        sheet = stylesheet(dark)
        # Setting a sheet re-polishes every widget the application has, even when it is the
        # one already set (a second window of one application, each test's window): skipped
        if self.app.styleSheet() != sheet:
            self.app.setStyleSheet(sheet)
        for fn in list(self.listeners):
            fn(dark)


def stylesheet(dark: bool) -> str:
    text = load_stylesheet()
    if not dark:
        return text
    for light, colour in DARK_COLOURS.items():
        text = text.replace(light, colour)
    return text.replace("color: white", f"color: {DARK_SEND_TEXT}")


def dark_palette() -> QPalette:
    p = QPalette()
    base, window, text = QColor("#23262b"), QColor("#1b1d21"), QColor("#e3e6ea")
    for role, colour in ((QPalette.ColorRole.Window, window),
                         (QPalette.ColorRole.WindowText, text),
                         (QPalette.ColorRole.Base, base),
                         (QPalette.ColorRole.AlternateBase, QColor("#2a2e34")),
                         (QPalette.ColorRole.Text, text),
                         (QPalette.ColorRole.Button, QColor("#2f3338")),
                         (QPalette.ColorRole.ButtonText, text),
                         (QPalette.ColorRole.ToolTipBase, base),
                         (QPalette.ColorRole.ToolTipText, text),
                         (QPalette.ColorRole.PlaceholderText, QColor("#80868b")),
                         (QPalette.ColorRole.Highlight, QColor("#3b6fd1")),
                         (QPalette.ColorRole.HighlightedText, QColor("#ffffff")),
                         (QPalette.ColorRole.Link, QColor("#8ab4f8"))):
        p.setColor(role, colour)
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#6b7076"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#6b7076"))
    return p


def is_dark() -> bool:
    """Whether the dark look is showing (read by views that pick colours themselves)."""
    app = QGuiApplication.instance()
    return app is not None and app.palette().color(QPalette.ColorRole.Window).lightness() < 128


THEME_LABELS = (("system", "Follow the &system"), ("light", "&Light"), ("dark", "&Dark"))


def theme_menu(theme: Theme, parent: QWidget, choose: Callable[[str], object]
               ) -> tuple[QMenu, dict[str, QAction]]:
    """View → Theme: one checkable entry a choice, `choose(choice)` when picked."""
    menu = QMenu(parent)
    group = QActionGroup(parent)
    actions: dict[str, QAction] = {}
    for choice, label in THEME_LABELS:
        action = menu.addAction(label)
        action.setCheckable(True)
        action.setChecked(choice == theme.choice)
        action.triggered.connect(lambda _=False, c=choice: choose(c))
        group.addAction(action)
        actions[choice] = action
    return menu, actions
