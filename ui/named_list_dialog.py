"""The frame of a dialog that edits a list of named items saved in the settings (Connections,
MCP servers): the list with New / Delete on the left, a status line, Save that replaces the
edited item or appends a new one (names stay unique), Delete. Each dialog adds its form."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLayout,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)
R = TypeVar("R")


class NamedListDialog(QDialog, Generic[T]):
    """Subclasses build their form, call `_list_panel`, `_status_label`, `_save_button` and
    `_finish`, and implement the hooks below (`_items`, `_store`, `_list_text`, `_load`,
    `_new_item`, `save_current`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._editing: str | None = None  # the saved name being edited (None: a new one)

    # -- hooks ------------------------------------------------------------------------------
    def _items(self) -> Sequence[T]:
        raise NotImplementedError

    def _store(self, items: list[T]) -> None:
        """Save the whole list into the settings."""
        raise NotImplementedError

    def _list_text(self, item: T) -> str:
        return item.name

    def _load(self, item: T | None) -> None:
        """Show `item` in the form (None: an empty one); sets `_editing`."""
        raise NotImplementedError

    def _new_item(self) -> None:
        """The New button (and an empty list): start an empty form."""
        raise NotImplementedError

    def save_current(self) -> bool:
        raise NotImplementedError

    # -- building -----------------------------------------------------------------------
    def _list_panel(self, object_name: str, min_width: int, delete_text: str) -> QVBoxLayout:
        """The list with New and Delete under it (`self.list`, `self.delete_button`)."""
        self.list = QListWidget()
        self.list.setObjectName(object_name)
        self.list.setMinimumWidth(min_width)
        self.list.currentRowChanged.connect(self._show_row)
        new_button = QPushButton("New")
        new_button.clicked.connect(self._new_item)
        self.delete_button = QPushButton(delete_text)
        self.delete_button.clicked.connect(self.delete_current)
        left = QVBoxLayout()
        left.addWidget(self.list, 1)
        row = QHBoxLayout()
        row.addWidget(new_button)
        row.addWidget(self.delete_button)
        left.addLayout(row)
        return left

    def _status_label(self, object_name: str) -> QLabel:
        self.status = QLabel()
        self.status.setObjectName(object_name)
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return self.status

    def _save_button(self, text: str) -> QPushButton:
        self.save_button = QPushButton(text)
        self.save_button.setDefault(True)
        self.save_button.clicked.connect(self.save_current)
        return self.save_button

    def _finish(self, left: QLayout, right: QLayout) -> None:
        """Lay out list | form over a Close button, then fill the list."""
        body = QHBoxLayout()
        body.addLayout(left)
        body.addLayout(right, 1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.close)
        col = QVBoxLayout(self)
        col.addLayout(body, 1)
        col.addWidget(close)
        self._fill_list()

    # -- list -----------------------------------------------------------------------------
    def _fill_list(self, select: str | None = None) -> None:
        self.list.blockSignals(True)
        self.list.clear()  # current row -1: setCurrentRow below always loads the form
        for item in self._items():
            self.list.addItem(self._list_text(item))
        self.list.blockSignals(False)
        names = [item.name for item in self._items()]
        if select in names:
            self.list.setCurrentRow(names.index(select))
        elif names:
            self.list.setCurrentRow(0)
        else:
            self._new_item()

    def _show_row(self, row: int) -> None:
        items = self._items()
        if 0 <= row < len(items):
            self._load(items[row])

    def _start_new(self, focus: QWidget) -> None:
        self.list.blockSignals(True)
        self.list.setCurrentRow(-1)  # so picking a saved one afterwards loads it again
        self.list.blockSignals(False)
        self._load(None)
        focus.setFocus()

    # -- the form and the background action -------------------------------------------------
    def _checked_form(self, read: Callable[[], T], invalid: type[Exception]) -> T | None:
        """`read()`, the form's item, or None with what is wrong (`invalid`) in the status."""
        try:
            return read()
        except invalid as exc:
            self.show_status(str(exc), error=True)
            return None

    async def _with_button_off(self, button: QPushButton, work: Awaitable[R],
                               failed: type[Exception], prefix: str = "") -> R | None:
        """Await `work` (Test, Fetch models) with its button off so it is not started twice;
        None, with `prefix` and the error in the status, if it raises `failed`."""
        button.setEnabled(False)
        try:
            return await work
        except failed as exc:
            self.show_status(f"{prefix}{exc}", error=True)
            return None
        finally:
            button.setEnabled(True)

    # -- saving ---------------------------------------------------------------------------
    def _save_item(self, item: T, duplicate: str) -> bool:
        """Replace the edited item (or append a new one) and save; False, with `duplicate`
        in the status, if another item has the name already."""
        saved = list(self._items())
        if any(s.name == item.name for s in saved if s.name != self._editing):
            self.show_status(duplicate, error=True)
            return False
        index = next((i for i, s in enumerate(saved) if s.name == self._editing), None)
        if index is None:
            saved.append(item)
        else:
            saved[index] = item
        self._store(saved)
        self._fill_list(select=item.name)
        return True

    def delete_current(self) -> None:
        if self._editing is None:
            return
        self._store([s for s in self._items() if s.name != self._editing])
        self._fill_list()

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setProperty("error", "true" if error else "false")
        self.status.setStyleSheet("color: #c5221f;" if error else "")


D = TypeVar("D", bound=QDialog)


def show_once(parent: QWidget | None, kind: type[D], make: Callable[[], D]) -> D:
    """One dialog per window: shown again (raised) if it is open already."""
    existing = parent.findChild(kind) if parent is not None else None
    dialog = existing or make()
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
