"""The main window: shows the Workspace's chats as tabs, with docks, menus and a status bar.

What it shows lives in app/ (app/workspace.py: the chats; app/lifecycle.py: quitting);
this places the widgets, keeps the window's own look and size, and mirrors the engine's
state in the banner and the status bar.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QByteArray, Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QMainWindow,
    QMenu,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.bridge import BridgeState, Choice
from app.bridge.switch import model_name
from app.context import AppContext
from app.conversation import Conversation
from app.history.writer import HistoryWriter
from app.lifecycle import SIMULATOR_TIMEOUT_S, Lifecycle
from app.server.in_app import AppServer
from app.workspace import Workspace

from . import file_dialogs, menus
from .chart_look import style_plot
from .chat.chat_tab import ChatTab
from .chat_tabs import BUSY_MARK, ChatTabs
from .compare import open_compare
from .connections_dialog import open_connections
from .dock_room import DockRoom
from .dock_toggle import front_toggle
from .drafts import DraftSaver
from .engine_status import EngineStatus
from .help_menu import about_box, shortcuts_box
from .history.controller import HistoryController
from .load_banner import LoadBanner
from .mcp.servers_dialog import open_mcp_servers
from .model_switch import SwitchQuestion, ask_switch
from .models.library_dialog import ModelLibraryDialog
from .models.model_button import ModelButton
from .preferences import open_preferences
from .reflow import widen_when_shown
from .server_controls import ServerControls
from .sidebar.panel import Sidebar
from .simulator import SimulatorDock
from .speculative_menu import SpeculativeMenu
from .stats.panel import StatsDock
from .theme import Theme, theme_menu

__all__ = ["BUSY_MARK", "MainWindow"]


class MainWindow(QMainWindow):
    """`shutdown_finished()` fires once the engine stopped after the window was closed."""

    shutdown_finished = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None, *,
                 history: HistoryWriter | None = None) -> None:
        """`history`: the saved chats' writer, which only the Workspace holds; the context
        gets its reader, its entry for records (the server, stats and simulator's) and the
        API server's stored responses."""
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("BatchChat")
        self.resize(1200, 780)
        self.workspace = Workspace(ctx.bridge, ctx.settings, history)
        ctx.history_reader, ctx.records = self.workspace.history_reader, self.workspace.records
        ctx.api_responses = self.workspace.api_responses
        self.lifecycle = Lifecycle(self.workspace, ctx.bridge)
        self._closing = False
        self._closed = False
        self._tasks: set[asyncio.Task[object]] = set()
        self.switch_question: SwitchQuestion | None = None  # open while it asks
        # unsent drafts to disk as they are typed, so a killed app keeps them too
        self.draft_saver = DraftSaver(self.workspace, self)

        central = QWidget()
        col = QVBoxLayout(central)
        col.setContentsMargins(0, 0, 0, 0)
        col.setSpacing(0)
        self.banner = LoadBanner()
        self.banner.choose_model.connect(self.choose_model)
        # load progress, a failed load beside a working model, a switch waiting for replies
        self.banner.watch(ctx.bridge, self.workspace.titles)
        col.addWidget(self.banner)
        self.history = (HistoryController(self, self.workspace, self.lifecycle)
                        if history is not None else None)
        if self.history is not None:
            col.addWidget(self.history.banner)  # under the model's banner, above the tabs
            self.history.refocus = self.return_focus  # when the History dialog closes
        self.tabs = ChatTabs(ctx, self.workspace)
        self.tabs.draft_typed = self.draft_saver.changed
        self.sidebar: Sidebar | None = None
        self.sidebar_action: QAction | None = None
        if history is not None:  # the sidebar lists the history's chats
            col.addWidget(self._make_sidebar(), 1)
        else:
            col.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

        self.engine_status = EngineStatus(self, ctx.bridge, self.banner, self.workspace.titles,
                                          self._front_model)
        self.model_button = ModelButton(ctx.bridge, self.choose_model)
        self.statusBar().insertWidget(0, self.model_button)  # the model's name, first
        self._make_docks()
        self.api_server = ServerControls(self, AppServer(ctx))
        self.lifecycle.stop_simulator = lambda: self.sim_dock.shutdown(SIMULATOR_TIMEOUT_S)
        self.lifecycle.stop_server = self.api_server.shutdown
        file_dialogs.use(ctx.settings)  # dialogs open where the last one ended
        self.theme = Theme(QApplication.instance(), ctx.settings.theme, self)
        self.theme.listeners.append(self._look_changed)
        self.theme_menu, self.theme_actions = theme_menu(self.theme, self, self.set_theme)
        self.speculative_menu = SpeculativeMenu(ctx.settings, ctx.bridge, self.reload_model,
                                                self)
        self.actions_by_name = menus.build(self, self._menu_handlers())
        self.reopen_action = self.actions_by_name["reopen_tab"]
        self.reopen_action.setEnabled(False)
        self.workspace.reopenable_changed.connect(self.reopen_action.setEnabled)
        # a dock in a narrow window: the sidebar, then the settings panels give way, said so
        self.dock_room = DockRoom(self, (self.stats_dock, self.sim_dock), ctx.settings,
                                  self.chat_tabs, self.sidebar, self.sidebar_action)
        self.workspace.opened.connect(
            lambda conv, _i: self.dock_room.follow(self.tabs.tab_for(conv)))
        for tab in self.chat_tabs():
            self.dock_room.follow(tab)

        if not self.workspace.restore():
            self.workspace.open()
        if self.history is not None:
            self.history.show_notice()
        self._restore_layout()

    def _make_sidebar(self) -> QSplitter:
        """The conversation sidebar left of the tabs; shown as the settings remember."""
        self.sidebar = Sidebar(self.workspace)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("sidebarSplitter")
        split.setChildrenCollapsible(False)
        split.addWidget(self.sidebar)
        split.addWidget(self.tabs)
        split.setStretchFactor(1, 1)
        split.setSizes([250, 950])
        action = QAction(self)
        action.setCheckable(True)
        action.setChecked(self.ctx.settings.show_sidebar)
        self.sidebar.setVisible(self.ctx.settings.show_sidebar)
        action.toggled.connect(self.show_sidebar)
        self.sidebar_action = action
        return split

    def show_sidebar(self, shown: bool) -> None:
        """Show or hide the sidebar (remembered in the settings)."""
        if self.sidebar is None:
            return
        self.sidebar.setVisible(shown)
        if self.sidebar_action is not None and self.sidebar_action.isChecked() != shown:
            self.sidebar_action.setChecked(shown)
        self.ctx.settings.set_sidebar(shown)
        if shown:
            self.sidebar.reread_later()

    def _make_docks(self) -> None:
        """The live engine stats and the load simulator, hidden at first, in one place on
        the right (both want the full height)."""
        self.stats_dock = StatsDock(self.ctx, self.workspace.titles, self)
        self.sim_dock = SimulatorDock(self.ctx, self)
        self.sim_dock.run_finished.connect(self._sim_run_finished)
        for dock in (self.stats_dock, self.sim_dock):
            self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
            dock.hide()
            widen_when_shown(self, dock)
        self.tabifyDockWidget(self.stats_dock, self.sim_dock)

    def _menu_handlers(self) -> dict[str, menus.Handler]:
        tabs = self.tabs
        handlers: dict[str, menus.Handler] = {
            "new_tab": self.new_tab, "close_tab": self.close_current_tab,
            "rename_tab": self.rename_tab, "load_model": self.choose_model,
            "speculative": self.speculative_menu,
            "connections": lambda: self.keys_back_after(
                open_connections(self.ctx.settings, self)),
            "mcp_servers": lambda: self.keys_back_after(open_mcp_servers(self.ctx, self)),
            "preferences": lambda: self.keys_back_after(
                open_preferences(self.ctx.settings, self, self.reload_model,
                                 [s for s in [self.ctx.bridge.source] if s])),
            "compare": lambda: (tab := self.current_tab()) and open_compare(tab),
            "reopen_tab": self.reopen_closed_tab, "quit": self.close,
            "undo_delete": self.undo_delete,
            # shown and raised in front of the other dock, or closed when in front
            "stats": front_toggle(self.stats_dock),
            "simulator": front_toggle(self.sim_dock), "theme": self.theme_menu,
            "api_server": self.api_server.action,
            "server_settings": self.api_server.settings_action,
            "shortcuts": lambda: shortcuts_box(self),
            "about": lambda: about_box(self, self.ctx.bridge),
            "next_tab": lambda: tabs.step(1), "previous_tab": lambda: tabs.step(-1),
        }
        for n in range(1, 10):
            handlers[f"tab_{n}"] = lambda n=n: tabs.go_to(n - 1 if n < 9 else -1)
        if self.history is not None:
            handlers["history"] = self.history.show_history
        if self.sidebar_action is not None:
            handlers["sidebar"] = self.sidebar_action
        # a dialog a menu entry opens gives the keys back to the window when it closes
        return {name: h if isinstance(h, (QAction, QMenu)) else self._keys_back_from(h)
                for name, h in handlers.items()}

    def _keys_back_from(self, handler: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            result = handler()
            if isinstance(result, QDialog):
                self.keys_back_after(result)
            return result
        return run

    # -- look and what the window remembers ----------------------------------------------
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
        self.workspace.restore_drafts()
        self.workspace.front_changed.connect(self.draft_saver.changed)
        self.workspace.closed.connect(self.draft_saver.changed)  # its draft leaves the saved

    def remember_layout(self) -> None:
        """Window size, dock layout and unsent drafts, for the next start."""
        s = self.ctx.settings
        self.draft_saver.stop()  # saved here, once more, as they are now
        self.workspace.remember()
        s.window_geometry = bytes(self.saveGeometry().toBase64().data()).decode("ascii")
        s.window_state = bytes(self.saveState().toBase64().data()).decode("ascii")
        s.save()

    def _sim_run_finished(self) -> None:
        dialog = self.history.dialog if self.history is not None else None
        if dialog is not None and dialog.isVisible():
            dialog.refresh()  # list the run just saved (it refreshes on reopening anyway)

    # -- tabs (the workspace decides; these are the menus' and tests' way in) -------------
    def chat_tabs(self) -> list[ChatTab]:
        return self.tabs.tabs()

    def current_tab(self) -> ChatTab | None:
        return self.tabs.currentWidget()  # type: ignore[return-value]

    def _front_model(self) -> str | None:
        """The local model of the chat in front (None: the default one, or a remote
        backend's chat): the status bar's figures are that model's."""
        front = self.workspace.front
        return front.model if front is not None and front.backend is None else None

    def new_tab(self, conversation: Conversation | None = None) -> ChatTab:
        """A new chat, or a tab for `conversation`, in front."""
        return self.tabs.tab_for(self.workspace.open(conversation))

    def close_tab(self, index: int) -> None:
        """Close a tab; a reply it is generating is cancelled. The last tab is replaced."""
        tab = self.tabs.widget(index)
        if isinstance(tab, ChatTab):
            self.workspace.close(tab.conversation)

    def close_current_tab(self) -> None:
        if self.tabs.count():
            self.close_tab(self.tabs.currentIndex())

    def reopen_closed_tab(self) -> ChatTab | None:
        conv = self.workspace.reopen()
        return self.tabs.tab_for(conv) if conv is not None else None

    def undo_delete(self) -> bool:
        """Put back the messages deleted last in the chat in front."""
        tab = self.current_tab()
        return tab is not None and tab.undo_delete()

    def rename_tab(self, index: int | None = None) -> None:
        self.tabs.rename(index)

    def set_tab_title(self, tab: ChatTab, title: str) -> None:
        self.workspace.rename(tab.conversation, title)

    # -- model --------------------------------------------------------------------------
    def load_model(self, source: str) -> asyncio.Task[bool]:
        """Load `source`: the one way every part of the window switches the model. With
        local replies running (chat tabs, compare columns, the simulator, the API server)
        it asks first: let them finish, stop them, or cancel (ui/model_switch.py). The task
        is True once `source` serves; False if cancelled or the load failed (then the model
        in use keeps serving)."""
        task = asyncio.ensure_future(self._load(source))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _load(self, source: str) -> bool:
        bridge = self.ctx.bridge
        busy = self._switch_busy()
        if busy:
            self.statusBar().showMessage(busy, 10000)
            return False
        choice = Choice.FINISH
        running = bridge.running()
        if running.total:
            box = ask_switch(self, source, running, self.workspace.titles())
            if box.parentWidget() is self:  # over another dialog, that one takes them back
                self.keys_back_after(box)
            self.switch_question = box
            try:
                answer = await box.answer
            finally:
                self.switch_question = None
            if answer is None:
                return False
            choice = answer
        ok = await bridge.switch(source, choice)
        if ok:
            self.ctx.settings.remember_model(source)  # the next start, the recent list
        return ok

    def reload_model(self) -> asyncio.Task[bool] | None:
        """Load the model serving now again (engine settings apply at a load)."""
        source = self.ctx.bridge.source
        return self.load_model(source) if source is not None else None

    def _switch_busy(self) -> str:
        """Why another load cannot start now ("" if it can)."""
        bridge = self.ctx.bridge
        if self.switch_question is not None:
            self.switch_question.raise_()
            return "Answer the question about the running replies first."
        pending = bridge.pending_switch
        if pending is not None:
            return (f"Already switching to {model_name(pending.source)}; cancel that in "
                    "the banner first.")
        if bridge.state == BridgeState.LOADING:
            return "A model is loading; try again once it has loaded."
        return ""

    def choose_model(self) -> ModelLibraryDialog:
        """Open the model library (the Load model… menu entry and the model button)."""
        bridge = self.ctx.bridge
        reason = bridge.message if bridge.state == BridgeState.FAILED else ""
        current = bridge.attempted or bridge.source or self.ctx.settings.model
        dialog = ModelLibraryDialog(current, reason, self,
                                    recent=self.ctx.settings.recent_models, bridge=bridge,
                                    settings=self.ctx.settings)
        dialog.chosen.connect(self.load_model)
        self.keys_back_after(dialog)
        dialog.open()
        return dialog

    def keys_back_after(self, dialog: QDialog) -> QDialog:
        """`return_focus` once `dialog` closes (connected once per dialog)."""
        if not dialog.property("returnsFocus"):
            dialog.setProperty("returnsFocus", True)
            dialog.finished.connect(lambda _result: self.return_focus())
        return dialog

    def return_focus(self) -> None:
        """A dialog closed: this window and its chat's input take the keys again (else no
        window may be active until the user clicks one, and the shortcuts do nothing)."""
        if self._closing:
            return
        self.activateWindow()
        tab = self.current_tab()
        if tab is not None:
            tab.input.setFocus(Qt.FocusReason.ActiveWindowFocusReason)

    # -- closing (the steps are app/lifecycle.py's) --------------------------------------
    @property
    def shutdown_s(self) -> float | None:
        return self.lifecycle.shutdown_s

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        if self._closed:
            event.accept()
            return
        event.ignore()  # close for real once the engine has stopped
        if self._closing:
            return
        if self.history is not None and not self.history.may_quit():
            return  # unsaved history: the user is asked first
        if self.sidebar is not None:
            self.sidebar.finish()  # a delete still waiting for its undo happens now
        self.remember_layout()
        self._closing = True
        if self.switch_question is not None:
            self.switch_question.close()  # no switch: the app is closing
        self.statusBar().showMessage("Stopping the engine …")
        self._tasks.add(asyncio.ensure_future(self._shutdown()))

    async def _shutdown(self) -> None:
        for tab in self.chat_tabs():  # cancelled now, so the loop sees them end before it stops
            tab.stop_drafts_work()
        self.engine_status.stop()
        self.model_button.stop()
        if self.history is not None:
            self.history.stop()
        self.stats_dock.stop()
        try:
            await self.ctx.mcp.close()  # stdio MCP servers' processes end with the app
            await self.lifecycle.shutdown()
        finally:
            for tab in self.chat_tabs():  # the settings outlive this window (tests, restarts)
                tab.detach()
            self._closed = True
            self.close()
            self.shutdown_finished.emit()
