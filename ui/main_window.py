"""The main window: chat tabs on one shared engine, a load banner, a live status bar."""

from __future__ import annotations

import asyncio
import time

import pyqtgraph as pg
from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QInputDialog,
    QLabel,
    QMainWindow,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.bridge import BridgeState
from app.context import AppContext
from app.conversation import Conversation
from app.kv_saver import KVSaver
from app.server.in_app import AppServer

from . import drafts, file_dialogs
from .chart_look import style_plot
from .chat.chat_tab import ChatTab
from .connections_dialog import open_connections
from .help_menu import about_box, shortcuts_box
from .history.controller import HistoryController
from .load_banner import LoadBanner
from .model_picker import ModelPickerDialog
from .reflow import widen_when_shown
from .server_controls import ServerControls
from .simulator import SimulatorDock
from .stats.panel import StatsDock
from .tab_bar import ChatTabBar
from .theme import Theme
from .widgets import ElidedLabel

BUSY_MARK = "● "
CLOSED_TABS_KEPT = 20


class MainWindow(QMainWindow):
    """`shutdown_finished()` fires once the engine stopped after the window was closed."""

    shutdown_finished = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("BatchChat")
        self.resize(1200, 780)
        self.shutdown_s: float | None = None
        self._closing = False
        self._closed = False
        self._tasks: set[asyncio.Task[object]] = set()
        self.kv_saver = KVSaver(ctx.bridge)  # open chats' KV to disk when idle and at quit
        # unsent drafts to disk as they are typed, so a killed app keeps them too
        self.draft_saver = drafts.DraftSaver(ctx.settings, self.chat_tabs, self)

        central = QWidget()
        col = QVBoxLayout(central)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        self.banner = LoadBanner()
        self.banner.choose_model.connect(self.choose_model)
        self.banner.watch(ctx.bridge)  # load progress, a failed load beside a working model
        col.addWidget(self.banner)
        self.tabs = QTabWidget()
        self.tabs.setTabBar(ChatTabBar())  # fixed-width tabs: close buttons never jump
        self.tabs.setTabsClosable(True)
        self.tabs.setMovable(True)
        self.tabs.setDocumentMode(True)
        self.tabs.tabCloseRequested.connect(self.close_tab)
        self.tabs.tabBarDoubleClicked.connect(self.rename_tab)
        plus = QToolButton()
        plus.setText("+")
        plus.setObjectName("newTabButton")
        plus.setToolTip("New chat (Ctrl+T)")
        plus.clicked.connect(self.new_tab)
        self.tabs.setCornerWidget(plus)
        col.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

        self.model_label = ElidedLabel()  # a long model name: … in its middle, not cut off
        self.stats_label = QLabel()
        self.stats_label.setObjectName("engineStats")
        self.statusBar().addWidget(self.model_label, 1)
        self.statusBar().addPermanentWidget(self.stats_label)
        self._stats_timer = QTimer(self)
        self._stats_timer.setInterval(500)
        self._stats_timer.timeout.connect(self._show_engine_stats)
        self._stats_timer.start()

        self._make_actions()
        self._closed_tabs: list[Conversation] = []  # most recently closed last
        self._make_tab_actions()
        self._make_stats_dock()
        self._make_simulator_dock()
        self.api_server = ServerControls(self, AppServer(ctx))
        ctx.bridge.state_changed.connect(self._on_state)
        self._on_state(ctx.bridge.state, ctx.bridge.message)
        self.history = HistoryController(self, ctx.history) if ctx.history else None
        if self.history is None or not self.history.restore_tabs():
            self.new_tab()
        if self.history is not None:
            self.history.show_notice()
        self._make_look_and_help()

    def _make_actions(self) -> None:
        menu = self.menuBar().addMenu("&Chat")
        for text, keys, slot in (
            ("&New tab", "Ctrl+T", self.new_tab),
            ("&Close tab", "Ctrl+W", self.close_current_tab),
            ("&Rename tab…", "F2", self.rename_tab),
            ("&Load model…", "Ctrl+O", self.choose_model),
            ("Co&nnections…", "Ctrl+Shift+K", lambda: open_connections(self.ctx.settings, self)),
            ("&Quit", "Ctrl+Q", self.close),
        ):
            action = QAction(text, self)
            action.setShortcut(QKeySequence(keys))
            action.triggered.connect(lambda _=False, s=slot: s())
            menu.addAction(action)
            self.addAction(action)

    def _make_stats_dock(self) -> None:
        """The live engine stats panel (hidden at first), toggled from View (Ctrl+Shift+S)."""
        self.stats_dock = StatsDock(self.ctx, self._tab_titles, self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.stats_dock)
        self.stats_dock.hide()
        widen_when_shown(self, self.stats_dock)
        toggle = self.stats_dock.toggleViewAction()
        toggle.setText("Engine &stats")
        toggle.setShortcut(QKeySequence("Ctrl+Shift+S"))
        view = next((a.menu() for a in self.menuBar().actions() if a.text() == "&View"), None)
        (view or self.menuBar().addMenu("&View")).addAction(toggle)
        self.addAction(toggle)

    def _make_simulator_dock(self) -> None:
        """The load simulator (hidden at first), toggled from View (Ctrl+Shift+L)."""
        self.sim_dock = SimulatorDock(self.ctx, self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.sim_dock)
        self.tabifyDockWidget(self.stats_dock, self.sim_dock)  # both want the full height
        self.sim_dock.hide()
        widen_when_shown(self, self.sim_dock)
        self.sim_dock.run_finished.connect(self._sim_run_finished)
        toggle = self.sim_dock.toggleViewAction()
        toggle.setText("&Load simulator")
        toggle.setShortcut(QKeySequence("Ctrl+Shift+L"))
        view = next(a.menu() for a in self.menuBar().actions() if a.text() == "&View")
        view.addAction(toggle)
        self.addAction(toggle)

    # -- look, help, and what the window remembers ---------------------------------------
    def _make_look_and_help(self) -> None:
        """View → Theme, the Help menu, Quit last in Chat, and the window's remembered
        size, dock layout and drafts."""
        file_dialogs.use(self.ctx.settings)  # dialogs open where the last one ended
        self.theme = Theme(QApplication.instance(), self.ctx.settings.theme, self)
        self.theme.listeners.append(self._look_changed)
        view = next(a.menu() for a in self.menuBar().actions() if a.text() == "&View")
        themes = view.addMenu("&Theme")
        group = QActionGroup(self)
        self.theme_actions: dict[str, QAction] = {}
        for choice, label in (("system", "Follow the &system"), ("light", "&Light"),
                              ("dark", "&Dark")):
            action = themes.addAction(label)
            action.setCheckable(True)
            action.setChecked(choice == self.theme.choice)
            action.triggered.connect(lambda _=False, c=choice: self.set_theme(c))
            group.addAction(action)
            self.theme_actions[choice] = action
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction("&Keyboard shortcuts", lambda: shortcuts_box(self))
        help_menu.addAction("&About BatchChat", lambda: about_box(self, self.ctx.bridge))
        self.keep_quit_last()
        self._restore_layout()

    def keep_quit_last(self) -> None:
        """Quit goes at the end of the Chat menu, whatever was added after it."""
        menu = next(a.menu() for a in self.menuBar().actions() if a.text() == "&Chat")
        quit_action = next((a for a in menu.actions() if a.text() == "&Quit"), None)
        if quit_action is not None and menu.actions()[-1] is not quit_action:
            menu.removeAction(quit_action)
            menu.addSeparator()
            menu.addAction(quit_action)

    def set_theme(self, choice: str) -> None:
        self.theme.set_choice(choice)
        self.theme_actions[self.theme.choice].setChecked(True)
        self.ctx.settings.theme = self.theme.choice
        self.ctx.settings.save()

    def _look_changed(self, dark: bool) -> None:
        for tab in self.chat_tabs():
            for widget in tab.messages.widgets:
                widget.body.rerender()
        for plot in self.findChildren(pg.PlotWidget):  # the stats and simulator charts
            style_plot(plot, dark)

    def _restore_layout(self) -> None:
        s = self.ctx.settings
        if s.window_geometry:
            self.restoreGeometry(QByteArray.fromBase64(s.window_geometry.encode("ascii")))
        if s.window_state:
            self.restoreState(QByteArray.fromBase64(s.window_state.encode("ascii")))
        current = self.current_tab()
        placed = drafts.restore(s, self.chat_tabs(), self.new_tab)
        # the tab in front at the last quit comes back in front (a restored draft's tab
        # included), else the history's first tab stays there
        front = drafts.front_tab(s, self.chat_tabs(), placed) or current
        if front is not None:
            self.tabs.setCurrentWidget(front)
            s.front_chat = front.conversation.session_id  # its id now (a draft's tab: new)
        self.tabs.currentChanged.connect(self._front_changed)

    def _front_changed(self, _index: int) -> None:
        tab = self.current_tab()
        if isinstance(tab, ChatTab) and not self._closing:
            self.ctx.settings.front_chat = tab.conversation.session_id
            self.draft_saver.changed()

    def remember_layout(self) -> None:
        """Window size, dock layout and unsent drafts, for the next start."""
        s = self.ctx.settings
        self.draft_saver.stop()  # saved here, once more, from the tabs as they are
        tab = self.current_tab()
        if isinstance(tab, ChatTab):
            s.front_chat = tab.conversation.session_id
        s.window_geometry = bytes(self.saveGeometry().toBase64().data()).decode("ascii")
        s.window_state = bytes(self.saveState().toBase64().data()).decode("ascii")
        drafts.remember(s, self.chat_tabs())
        s.save()

    def _sim_run_finished(self) -> None:
        dialog = self.history.dialog if self.history is not None else None
        if dialog is not None and dialog.isVisible():
            dialog.refresh()  # list the run just saved (it refreshes on reopening anyway)

    def _tab_titles(self) -> dict[str, str]:
        return {t.conversation.tag: t.conversation.title for t in self.chat_tabs()
                if isinstance(t, ChatTab)}

    # -- tabs ---------------------------------------------------------------------------
    def chat_tabs(self) -> list[ChatTab]:
        return [self.tabs.widget(i) for i in range(self.tabs.count())]  # type: ignore[misc]

    def current_tab(self) -> ChatTab | None:
        return self.tabs.currentWidget()  # type: ignore[return-value]

    def new_tab(self, conversation: Conversation | None = None) -> ChatTab:
        """A new chat, or a tab for `conversation` (restored or opened from the history)."""
        tab = ChatTab(self.ctx, conversation=conversation)
        index = self.tabs.addTab(tab, tab.conversation.title)
        tab.busy_changed.connect(lambda busy, t=tab: self._mark_busy(t, busy))
        tab.title_listener = lambda t=tab: self._mark_busy(t, t.conversation.is_busy)
        tab.conversation.meta_changed.connect(tab.title_listener)  # auto titles, renames
        self.kv_saver.watch(tab.conversation)
        self.draft_saver.watch(tab)
        self.tabs.setCurrentIndex(index)
        tab.input.setFocus()
        if self.history is not None:
            self.history.tab_added(tab)
        return tab

    def close_tab(self, index: int) -> None:
        """Close a tab; a reply it is generating is cancelled. The last tab is replaced."""
        tab = self.tabs.widget(index)
        if not isinstance(tab, ChatTab):
            return
        if self.history is not None:
            self.history.tab_closing(tab)
        self.kv_saver.forget(tab.conversation)
        tab.conversation.meta_changed.disconnect(tab.title_listener)
        tab.close_tab()
        self._remember_closed(tab.conversation)
        self.tabs.removeTab(index)
        tab.deleteLater()
        if self.history is not None:
            self.history.save_order()
        if tab.input.toPlainText().strip():
            self.draft_saver.changed()  # its draft leaves the saved ones
        if self.tabs.count() == 0 and not self._closing:
            self.new_tab()

    # -- tab navigation and reopening ---------------------------------------------------
    def _make_tab_actions(self) -> None:
        """Reopen closed tab (Ctrl+Shift+T), next/previous (Ctrl+Tab), Ctrl+1…9."""
        menu = next(a.menu() for a in self.menuBar().actions() if a.text() == "&Chat")
        quit_action = next((a for a in menu.actions() if a.text() == "&Quit"), None)
        self.reopen_action = QAction("Re&open closed tab", self)
        self.reopen_action.setShortcut(QKeySequence("Ctrl+Shift+T"))
        self.reopen_action.triggered.connect(lambda _=False: self.reopen_closed_tab())
        self.reopen_action.setEnabled(False)
        menu.insertAction(quit_action, self.reopen_action)  # Quit stays last
        self.addAction(self.reopen_action)
        moves = [("Ctrl+Tab", lambda: self._step_tab(1)),
                 ("Ctrl+Shift+Backtab", lambda: self._step_tab(-1)),
                 ("Ctrl+PgDown", lambda: self._step_tab(1)),
                 ("Ctrl+PgUp", lambda: self._step_tab(-1))]
        # Ctrl+1…8 pick that tab, Ctrl+9 the last one (as browsers do)
        moves += [(f"Ctrl+{n}", lambda n=n: self._go_to_tab(n - 1 if n < 9 else -1))
                  for n in range(1, 10)]
        for keys, slot in moves:
            action = QAction(self)
            action.setShortcut(QKeySequence(keys))
            action.triggered.connect(lambda _=False, s=slot: s())
            self.addAction(action)

    def _step_tab(self, step: int) -> None:
        count = self.tabs.count()
        if count:
            self.tabs.setCurrentIndex((self.tabs.currentIndex() + step) % count)
            self._focus_input()

    def _go_to_tab(self, index: int) -> None:
        count = self.tabs.count()
        if count and index < count:
            self.tabs.setCurrentIndex(index % count)
            self._focus_input()

    def _focus_input(self) -> None:
        tab = self.current_tab()
        if tab is not None:
            tab.input.setFocus()

    def _remember_closed(self, conv: Conversation) -> None:
        if not conv.messages:
            return  # an empty chat is not worth reopening (nor kept in the history)
        for msg in conv.messages:  # a reply cut off by closing reads as stopped
            if msg.streaming:
                msg.streaming, msg.finish_reason = False, msg.finish_reason or "cancelled"
        self._closed_tabs.append(conv)
        del self._closed_tabs[:-CLOSED_TABS_KEPT]
        self.reopen_action.setEnabled(True)

    def reopen_closed_tab(self) -> ChatTab | None:
        """Bring back the most recently closed chat: from the history when there is one (as
        saved at closing), else the conversation itself."""
        while self._closed_tabs:
            conv = self._closed_tabs.pop()
            self.reopen_action.setEnabled(bool(self._closed_tabs))
            if self.history is not None:
                tab = self.history.open_session(conv.session_id)
                if tab is not None:
                    return tab
                continue  # deleted from the history meanwhile: try the one before
            # a fresh Conversation: the closed tab's widgets still listen to the old one
            copy = Conversation(conv.bridge, title=conv.title, system_prompt=conv.system_prompt,
                                params=conv.params, session_id=conv.session_id,
                                messages=conv.messages, preset=conv.preset)
            return self.new_tab(conversation=copy)
        return None

    def close_current_tab(self) -> None:
        if self.tabs.count():
            self.close_tab(self.tabs.currentIndex())

    def rename_tab(self, index: int | None = None) -> None:
        index = self.tabs.currentIndex() if index is None or index < 0 else index
        tab = self.tabs.widget(index)
        if not isinstance(tab, ChatTab):
            return
        dialog = QInputDialog(self)
        dialog.setWindowTitle("Rename tab")
        dialog.setLabelText("Name:")
        dialog.setTextValue(tab.conversation.title)
        dialog.textValueSelected.connect(lambda name: self.set_tab_title(tab, name))
        dialog.open()  # never exec(): qasync runs this loop

    def set_tab_title(self, tab: ChatTab, title: str) -> None:
        title = title.strip()
        if title:
            tab.conversation.rename(title)
            self._mark_busy(tab, tab.conversation.is_busy)

    def _mark_busy(self, tab: ChatTab, busy: bool) -> None:
        index = self.tabs.indexOf(tab)
        if index >= 0:
            title = tab.conversation.title
            self.tabs.setTabText(index, BUSY_MARK + title if busy else title)
            self.tabs.setTabToolTip(index, f"{title} (generating)" if busy else title)

    # -- model --------------------------------------------------------------------------
    def load_model(self, source: str) -> asyncio.Task[bool]:
        task = asyncio.ensure_future(self._load(source))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _load(self, source: str) -> bool:
        ok = await self.ctx.bridge.load(source)
        if ok:
            self.ctx.settings.remember_model(source)  # the next start, the recent list
        return ok

    def choose_model(self) -> ModelPickerDialog:
        bridge = self.ctx.bridge
        reason = bridge.message if bridge.state == BridgeState.FAILED else ""
        current = bridge.attempted or bridge.source or self.ctx.settings.model
        dialog = ModelPickerDialog(current, reason, self, recent=self.ctx.settings.recent_models,
                                   bridge=bridge)
        dialog.chosen.connect(self.load_model)
        dialog.open()
        return dialog

    def _on_state(self, state: BridgeState, message: str) -> None:
        self.banner.show_state(state, message)
        if state == BridgeState.READY:
            self.model_label.setText(f"Model: {message}")
        elif state == BridgeState.LOADING:
            self.model_label.setText(message)
        elif state == BridgeState.FAILED:
            self.model_label.setText("No model loaded")

    def _show_engine_stats(self) -> None:
        s = self.ctx.bridge.stats()
        if s is None:
            self.stats_label.clear()
            return
        self.stats_label.setText(
            f"{s.active} generating · {s.queued} queued · {s.tokens_per_s:.1f} tok/s · "
            f"batch {s.batch_size} · {s.completed} done")

    # -- closing ------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        if self._closed:
            event.accept()
            return
        event.ignore()  # close for real once the engine has stopped
        if not self._closing and self.history is not None and not self.history.may_quit():
            return  # unsaved history: the user is asked first
        if not self._closing:
            self.remember_layout()
        if not self._closing:
            self._closing = True
            self.statusBar().showMessage("Stopping the engine …")
            task = asyncio.ensure_future(self._shutdown())
            self._tasks.add(task)

    async def _shutdown(self) -> None:
        started = time.perf_counter()
        self._stats_timer.stop()
        if self.history is not None:
            self.history.stop()
        self.stats_dock.stop()
        try:
            await self.sim_dock.shutdown(timeout=3.0)  # first: its requests end as "cancelled"
            await self.api_server.shutdown()  # so do the API's; the port is released
            # The open chats' KV goes to disk, so their next turn after a restart reuses it.
            await self.kv_saver.save_all(t.conversation for t in self.chat_tabs())
            await self.ctx.bridge.shutdown(timeout=3.0)
        finally:
            self.shutdown_s = time.perf_counter() - started
            self.ctx.bridge.state_changed.disconnect(self._on_state)
            self._closed = True
            self.close()
            self.shutdown_finished.emit()
