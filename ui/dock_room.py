"""Room for a dock in a narrow window. The chat keeps its 480 px; an open stats or simulator
dock wants DOCK_WANT px to show its form and numbers whole. Where the window cannot give
both, the sidebar gives way first, then the tabs' settings panels: hidden while a dock is
open, with View → Conversation sidebar and the Settings buttons unticked and a word in the
status bar (they hid without a word, the View entry still ticked). They come back when
the docks close or the window widens; Ctrl+B or Settings brings one back at once (the
dock is then narrower). The saved choices (show_sidebar, show_settings_panel) stay."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QSplitter, QWidget
from shiboken6 import isValid

from app.settings import Settings

from .chat.chat_tab import CHAT_MIN_WIDTH, ChatTab
from .reflow import MIN_SLACK

DOCK_WANT = 400  # px: the simulator's form and the stats' numbers whole, one column
SIDEBAR_ROOM = 180  # px the sidebar needs to be of use
PANEL_ROOM = 200  # px: the settings panel's minimum
SLACK = 40  # splitter handles, the docks' frames
NOTE_MS = 8000
SETTLE_MS = 250
SQUEEZED = 40  # px over its minimum: a dock the layout squeezed, not a width chosen


class DockRoom(QObject):
    def __init__(self, window: QMainWindow, docks: Sequence[QDockWidget],
                 settings: Settings, tabs: Callable[[], list[ChatTab]],
                 sidebar: QWidget | None = None, sidebar_action: QAction | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.docks = list(docks)
        self.settings = settings
        self.tabs = tabs
        self.sidebar = sidebar
        self.sidebar_action = sidebar_action
        self.sidebar_room = True
        self.panel_room = True
        self._forced: set[str] = set()  # asked back by the user while a dock is open
        self._given: dict[str, int] = {}  # the width given here to each dock, by name
        for dock in self.docks:
            dock.visibilityChanged.connect(lambda _v: self.update())
        if sidebar_action is not None:
            sidebar_action.triggered.connect(self._sidebar_chosen)
        window.installEventFilter(self)

    def follow(self, tab: ChatTab) -> None:
        """A new tab: its panel as the others', its Settings button able to ask for room."""
        tab.room_wanted = lambda: self._want("panel")
        if not self.panel_room:
            tab.give_panel_room(False)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if watched is self.window and event.type() == QEvent.Type.Resize:
            self.update()
        return False

    def update(self) -> None:
        """Decide again who gives way (a dock opened or closed, the window resized)."""
        if not isValid(self.window):
            return  # the app is quitting: the docks go after the window
        open_dock = any(not d.isHidden() and not d.isFloating() for d in self.docks)
        if not open_dock:
            self._forced.clear()
        needs = {"panel": PANEL_ROOM if self.settings.show_settings_panel else 0,
                 "sidebar": SIDEBAR_ROOM if self._sidebar_shown() else 0}
        # the one the user asked back is kept first; else the settings panel before the
        # sidebar (the sidebar gives way first)
        order = sorted(needs, key=lambda k: (k not in self._forced, k != "panel"))
        spare = self.window.width() - CHAT_MIN_WIDTH - SLACK - (DOCK_WANT if open_dock else 0)
        keep = {}
        for what in order:
            keep[what] = not open_dock or what in self._forced or spare >= needs[what]
            spare -= needs[what] if keep[what] else 0
        hidden = [name for what, name in (("sidebar", "sidebar"), ("panel", "settings"))
                  if needs[what] and not keep[what]
                  and (self.sidebar_room if what == "sidebar" else self.panel_room)]
        changed = (keep["sidebar"], keep["panel"]) != (self.sidebar_room, self.panel_room)
        self._set_sidebar_room(keep["sidebar"])
        self._set_panel_room(keep["panel"])
        if hidden:  # short: the status bar of a 900 px window shows it whole
            self.window.statusBar().showMessage(
                f"{' and '.join(hidden).capitalize()} hidden for the dock: Ctrl+B / "
                "Settings show them.", NOTE_MS)
        if open_dock and (changed or self._forced):
            # after Qt's layout, and again once a window system's resize has settled (X
            # applies a resize later, and a style change re-lays the docks out)
            for ms in (0, SETTLE_MS):
                QTimer.singleShot(ms, lambda: self._share(needs, keep))

    def _share(self, needs: dict[str, int], keep: dict[str, bool]) -> None:
        """Once Qt has laid out what was hidden or shown: the docks take what the chat and
        what is kept leave them, and a sidebar shown again gets its room."""
        if not isValid(self.window):
            return
        central = CHAT_MIN_WIDTH + SLACK + sum(n for k, n in needs.items() if keep[k])
        # the minimum widths of what was hidden or shown, before the docks are sized on them
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        width = max(self.window.width() - central, 0)
        # a width the user chose is kept, unless a part they asked back needs it; one near
        # the minimum (the window narrowed, a restored layout) or the one given here is not
        docks = [d for d in self.docks if d.isVisible() and not d.isFloating()
                 and (self._forced or d.width() <= d.minimumSizeHint().width() + SQUEEZED
                      or abs(d.width() - self._given.get(d.objectName(), -1)) <= MIN_SLACK)]
        if docks:
            self.window.resizeDocks(docks, [width] * len(docks), Qt.Orientation.Horizontal)
            self._given.update((d.objectName(), d.width()) for d in docks)
        split = self.sidebar.parentWidget() if self.sidebar is not None else None
        if isinstance(split, QSplitter) and self.sidebar is not None \
                and self.sidebar.isVisible() and self.sidebar.width() < SIDEBAR_ROOM:
            total = sum(split.sizes())
            split.setSizes([SIDEBAR_ROOM, max(total - SIDEBAR_ROOM, 0)])

    def _sidebar_shown(self) -> bool:
        return self.sidebar is not None and self.settings.show_sidebar

    def _set_sidebar_room(self, room: bool) -> None:
        if room == self.sidebar_room or self.sidebar is None:
            return
        self.sidebar_room = room
        shown = room and self.settings.show_sidebar
        self.sidebar.setVisible(shown)
        if self.sidebar_action is not None:
            self.sidebar_action.blockSignals(True)  # what is shown, not a choice to save
            self.sidebar_action.setChecked(shown)
            self.sidebar_action.blockSignals(False)

    def _set_panel_room(self, room: bool) -> None:
        if room == self.panel_room:
            return
        self.panel_room = room
        for tab in self.tabs():
            tab.give_panel_room(room)

    def _sidebar_chosen(self, checked: bool) -> None:
        if checked and not self.sidebar_room:
            self._want("sidebar")

    def _want(self, what: str) -> None:
        """The user asked for the sidebar or the settings panel back while a dock is open:
        it is kept (the other may give way instead)."""
        self._forced = {what}
        self.update()
