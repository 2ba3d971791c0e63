"""The sidebar's list: headers and chat rows; a click or Enter opens a chat, Delete
deletes it, F2 renames it, the context menu offers all of them."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtGui import QAction, QKeyEvent
from PySide6.QtWidgets import QAbstractItemView, QListWidget, QListWidgetItem, QMenu, QWidget

from app.history.sidebar import ChatRow, Entry, Header

from .delegate import ENTRY_ROLE, RowDelegate

_OPEN_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)
_OWN_KEYS = (*_OPEN_KEYS, Qt.Key.Key_Delete, Qt.Key.Key_F2)


class ChatListView(QListWidget):
    """Signals carry the row: `open_requested`, `pin_requested`, `rename_requested`,
    `delete_requested`."""

    open_requested = Signal(object)
    pin_requested = Signal(object)
    rename_requested = Signal(object)
    delete_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebarList")
        self.setItemDelegate(RowDelegate(self))
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setUniformItemSizes(False)
        self.setMouseTracking(True)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu_at)
        self.itemClicked.connect(lambda item: self._emit(self.open_requested, item))
        self.menu: QMenu | None = None  # the context menu open now (tests pick from it)

    def set_entries(self, entries: list[Entry], select: str | None = None) -> None:
        """Show `entries`, keeping the scroll position; the row of chat `select` (else the
        one selected before) is selected."""
        keep = select or (self.current_row().session_id if self.current_row() else None)
        scroll = self.verticalScrollBar().value()
        self.setUpdatesEnabled(False)
        try:
            self.clear()
            for entry in entries:
                item = QListWidgetItem()
                item.setData(ENTRY_ROLE, entry)
                if isinstance(entry, Header):
                    item.setFlags(Qt.ItemFlag.NoItemFlags)
                else:
                    item.setToolTip(entry.title + ("  (open in a tab)" if entry.is_open else ""))
                self.addItem(item)
                if isinstance(entry, ChatRow) and entry.session_id == keep:
                    self.setCurrentItem(item)
            self.verticalScrollBar().setValue(scroll)
        finally:
            self.setUpdatesEnabled(True)

    def rows(self) -> list[ChatRow]:
        entries = (self.item(i).data(ENTRY_ROLE) for i in range(self.count()))
        return [e for e in entries if isinstance(e, ChatRow)]

    def headers(self) -> list[str]:
        entries = (self.item(i).data(ENTRY_ROLE) for i in range(self.count()))
        return [e.label for e in entries if isinstance(e, Header)]

    def item_for(self, session_id: str) -> QListWidgetItem | None:
        for i in range(self.count()):
            entry = self.item(i).data(ENTRY_ROLE)
            if isinstance(entry, ChatRow) and entry.session_id == session_id:
                return self.item(i)
        return None

    def current_row(self) -> ChatRow | None:
        item = self.currentItem()
        entry = item.data(ENTRY_ROLE) if item is not None else None
        return entry if isinstance(entry, ChatRow) else None

    def select(self, session_id: str | None) -> None:
        item = self.item_for(session_id) if session_id else None
        if item is not None:
            self.setCurrentItem(item)
        else:
            self.clearSelection()

    # -- keys and the context menu ------------------------------------------------------
    def event(self, event: QEvent) -> bool:
        # F2 and Delete are the window's shortcuts too (rename tab...): here they act on
        # the row, so take them before the shortcut does
        if (event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent)
                and event.key() in _OWN_KEYS and self.current_row() is not None):
            event.accept()
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt override
        row = self.current_row()
        signal = {Qt.Key.Key_Return: self.open_requested, Qt.Key.Key_Enter: self.open_requested,
                  Qt.Key.Key_Delete: self.delete_requested,
                  Qt.Key.Key_F2: self.rename_requested}.get(Qt.Key(event.key()))
        if row is not None and signal is not None:
            signal.emit(row)
            return
        super().keyPressEvent(event)

    def _emit(self, signal: Signal, item: QListWidgetItem) -> None:
        entry = item.data(ENTRY_ROLE)
        if isinstance(entry, ChatRow):
            signal.emit(entry)  # type: ignore[attr-defined]

    def _menu_at(self, pos: QPoint) -> None:
        item = self.itemAt(pos)
        row = item.data(ENTRY_ROLE) if item is not None else None
        if not isinstance(row, ChatRow):
            return
        self.setCurrentItem(item)
        menu = self.context_menu(row)
        menu.popup(self.viewport().mapToGlobal(pos))

    def context_menu(self, row: ChatRow) -> QMenu:
        """The row's menu: Open, Pin/Unpin, Rename…, Delete."""
        menu = QMenu(self)
        for text, signal, keys in (
            ("Open" if not row.is_open else "Show tab", self.open_requested, "Enter"),
            ("Unpin" if row.pinned else "Pin", self.pin_requested, ""),
            ("Rename…", self.rename_requested, "F2"),
            ("Delete", self.delete_requested, "Del"),
        ):
            action = QAction(text, menu)
            if keys:
                action.setShortcutVisibleInContextMenu(True)
                action.setText(f"{text}\t{keys}")
            action.triggered.connect(lambda _=False, s=signal: s.emit(row))
            menu.addAction(action)
        menu.aboutToHide.connect(lambda: setattr(self, "menu", None))
        self.menu = menu
        return menu
