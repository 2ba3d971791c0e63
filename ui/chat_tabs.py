"""The chat tabs: one ChatTab per chat of the Workspace, in its order, its front chat in front.

The workspace decides (open, close, move, front); this widget shows it and hands back what
the user does to the tabs. A generating chat's tab title carries BUSY_MARK.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QApplication,
    QInputDialog,
    QStackedWidget,
    QTabWidget,
    QToolButton,
    QWidget,
)

from app.context import AppContext
from app.conversation import Conversation
from app.workspace import Workspace

from .chat.chat_tab import ChatTab
from .chat.draft_chips import restore_draft_files, saved_draft_files
from .compare import compare_button
from .rename_dialog import ask_rename
from .tab_bar import ChatTabBar

BUSY_MARK = "● "


class ChatTabs(QTabWidget):
    def __init__(self, ctx: AppContext, workspace: Workspace,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.workspace = workspace
        self.draft_typed: Callable[[], None] = lambda: None  # the draft saver's, when set
        self._clicked = False  # the front chat changes because the user picked its tab
        self.setTabBar(ChatTabBar())  # fixed-width tabs: close buttons never jump
        self.setTabsClosable(True)
        self.setMovable(True)
        self.setDocumentMode(True)
        self.tabCloseRequested.connect(lambda i: self._close(i))
        self.tabBarDoubleClicked.connect(self.rename)
        self.currentChanged.connect(self._current_changed)
        self.tabBar().tabMoved.connect(self._dragged)
        plus = QToolButton()
        plus.setText("+")
        plus.setObjectName("newTabButton")
        plus.setToolTip("New chat (Ctrl+T)")
        plus.clicked.connect(lambda _=False: workspace.open())
        self.setCornerWidget(plus)
        workspace.opened.connect(self._opened)
        workspace.closed.connect(self._closed)
        workspace.moved.connect(self._moved)
        workspace.front_changed.connect(self._front_changed)
        workspace.draft_restored.connect(lambda conv, text: self.tab_for(conv).input
                                         .setPlainText(text))
        workspace.draft_files_restored.connect(
            lambda conv, files: restore_draft_files(self.tab_for(conv), files))

    def tabs(self) -> list[ChatTab]:
        return [self.widget(i) for i in range(self.count())]  # type: ignore[misc]

    def tab_for(self, conv: Conversation) -> ChatTab:
        return next(t for t in self.tabs() if t.conversation is conv)

    # -- the workspace's changes --------------------------------------------------------
    def _opened(self, conv: Conversation, index: int) -> None:
        # built inside the tab widget's page stack, where insertTab puts it: a tab built
        # apart had its widgets' style sheet rules worked out again when it moved in
        pages = self.findChild(QStackedWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
        tab = ChatTab(self.ctx, conversation=conv, parent=pages)
        tab.add_to_top_row(compare_button(tab))  # one message, several targets
        self.insertTab(index, tab, conv.title)
        tab.busy_changed.connect(lambda busy, t=tab: self._mark_busy(t, busy))
        tab.branch_requested.connect(lambda i, t=tab: self.workspace.branch(t.conversation, i))
        # auto titles, renames (a Qt signal: it goes with the tab)
        tab.meta_changed.connect(lambda t=tab: self._mark_busy(t, t.conversation.is_busy))
        self._mark_busy(tab, conv.is_busy)  # its tooltip, and the numbers of the tabs after it
        tab.input.textChanged.connect(lambda t=tab: self._typed(t))
        # the draft's files and images (#52): kept in the history as they change
        tab.chips.changed.connect(lambda t=tab: self._chips_changed(t))
        tab.image_chips.changed.connect(lambda t=tab: self._chips_changed(t))
        if self.currentWidget() is tab:  # the first tab: already in front
            tab.input.setFocus()

    def _closed(self, conv: Conversation, _index: int) -> None:
        tab = self.tab_for(conv)
        had_keys = tab.isAncestorOf(QApplication.focusWidget())
        tab.close_tab()
        self.removeTab(self.indexOf(tab))
        tab.deleteLater()
        self._tips()  # the tabs after it have new numbers
        front = self.currentWidget()
        if had_keys and isinstance(front, ChatTab):
            # Ctrl+W: the tab now in front takes the keys (else Qt hands them to the next
            # widget in the window's chain, the sidebar's search box)
            front.take_keys()

    def _moved(self, conv: Conversation, index: int) -> None:
        tab = self.tab_for(conv)
        if self.indexOf(tab) != index:  # else the user dragged it there
            self.tabBar().moveTab(self.indexOf(tab), index)
        self._tips()

    def _front_changed(self, conv: Conversation | None) -> None:
        if conv is None or self._clicked:
            return
        tab = self.tab_for(conv)  # chosen by a key or a menu, or just opened
        self.setCurrentWidget(tab)
        tab.input.setFocus()

    # -- the user's changes -------------------------------------------------------------
    def _close(self, index: int) -> None:
        tab = self.widget(index)
        if isinstance(tab, ChatTab):
            self.workspace.close(tab.conversation)

    def _current_changed(self, _index: int) -> None:
        tab = self.currentWidget()
        if isinstance(tab, ChatTab):
            self._clicked = True
            try:
                self.workspace.set_front(tab.conversation)
            finally:
                self._clicked = False

    def _dragged(self, _from: int, to: int) -> None:
        tab = self.widget(to)
        if isinstance(tab, ChatTab):
            self.workspace.move(tab.conversation, to)

    def _typed(self, tab: ChatTab) -> None:
        self.workspace.set_draft(tab.conversation, tab.input.toPlainText())
        self.draft_typed()

    def _chips_changed(self, tab: ChatTab) -> None:
        self.workspace.set_draft_files(tab.conversation, saved_draft_files(tab))

    def step(self, step: int) -> None:
        """The next (1) or previous (-1) tab, wrapping around."""
        convs = self.workspace.conversations
        if convs and self.workspace.front in convs:
            i = convs.index(self.workspace.front)
            self._show(convs[(i + step) % len(convs)])

    def go_to(self, index: int) -> None:
        """The tab at `index` (-1: the last one)."""
        convs = self.workspace.conversations
        if convs and index < len(convs):
            self._show(convs[index % len(convs)])

    def _show(self, conv: Conversation) -> None:
        self.workspace.set_front(conv)
        self.tab_for(conv).input.setFocus()  # also when it was in front already

    def rename(self, index: int | None = None) -> QInputDialog | None:
        index = self.currentIndex() if index is None or index < 0 else index
        tab = self.widget(index)
        if not isinstance(tab, ChatTab):
            return None
        conv = tab.conversation
        return ask_rename(self, conv.title, lambda name: self.workspace.rename(conv, name))

    def _mark_busy(self, tab: ChatTab, busy: bool) -> None:
        index = self.indexOf(tab)
        if index >= 0:
            title = tab.conversation.title
            self.setTabText(index, BUSY_MARK + title if busy else title)
        self._tips()

    def _tips(self) -> None:
        """Every tab's tooltip: its whole title and its number (Ctrl+N), so tabs whose
        titles start alike (elided the same) can be told apart; numbers follow moves."""
        for index, tab in enumerate(self.tabs()):
            self.setTabToolTip(index, tab_tip(index, tab.conversation.title,
                                              tab.conversation.is_busy))


def tab_tip(index: int, title: str, busy: bool) -> str:
    keys = f" (Ctrl+{index + 1})" if index < 8 else ""
    return f"{title}{' — generating' if busy else ''}\nTab {index + 1}{keys}"
