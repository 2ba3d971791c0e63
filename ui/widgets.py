"""Small widget builders shared by the settings panel, the simulator form and the tables,
a one-line label that elides (the status bar's model), and the question before a delete."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QAbstractItemModel, QSize, Qt
from PySide6.QtGui import QIcon, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
    QHeaderView,
    QLabel,
    QMessageBox,
    QSizePolicy,
    QSpinBox,
    QTableView,
    QWidget,
)


def double_box(lo: float, hi: float, step: float, suffix: str = "", decimals: int = 2,
               special: str = "") -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    if suffix:
        box.setSuffix(suffix)
    if special:
        box.setSpecialValueText(special)  # shown at the minimum, read back as "unset"
    return box


def int_box(lo: int, hi: int, special: str = "") -> QSpinBox:
    box = QSpinBox()
    box.setRange(lo, hi)
    if special:
        box.setSpecialValueText(special)
    return box


def confirm_delete(parent: QWidget, title: str, text: str,
                   on_delete: Callable[[], object]) -> QMessageBox:
    """Ask before a delete (window-modal, opened, never exec(): qasync runs the loop).
    Its "Delete" button is the default, so Enter confirms as the question invites; Esc
    and Cancel change nothing. `on_delete()` runs on Delete. The box deletes itself."""
    box = QMessageBox(QMessageBox.Icon.Warning, title, text,
                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                      parent)
    delete = box.button(QMessageBox.StandardButton.Yes)
    delete.setText("Delete")
    delete.setObjectName("deleteButton")  # red text (resources/stylesheet.qss)
    delete.style().unpolish(delete)  # QMessageBox polished it under its old name
    delete.style().polish(delete)
    for button in box.buttons():  # no green tick on a delete: words only
        button.setIcon(QIcon())
    box.setDefaultButton(QMessageBox.StandardButton.Yes)
    box.setEscapeButton(QMessageBox.StandardButton.Cancel)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    delete.clicked.connect(lambda _=False: on_delete())
    box.open()
    return box


def readonly_table(model: QAbstractItemModel, name: str, widths: Sequence[int]) -> QTableView:
    """A compact, row-selecting, non-editable table with interactive column widths."""
    view = QTableView()
    view.setObjectName(name)
    view.setModel(model)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.setAlternatingRowColors(True)
    view.setWordWrap(False)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(20)
    view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    for column, width in enumerate(widths):
        view.setColumnWidth(column, width)
    return view


class ElidedLabel(QLabel):
    """One line that shortens its middle with … when it gets less room than its text (a
    status bar at 900 px and a long model name): never cut off mid-word at the edge. The
    whole text is `full_text()`, and the tooltip while it is shortened. `set_texts(full,
    short)`: `short` (less said: what to keep when room is short) shown instead of a
    shortened `full`."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self._short = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def full_text(self) -> str:
        return self._full

    def setText(self, text: str) -> None:  # noqa: N802 - Qt override
        self.set_texts(text, "")

    def set_texts(self, full: str, short: str) -> None:
        self._full, self._short = full, short
        self._fit()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + 4,
                     super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(self.fontMetrics().horizontalAdvance("M…M"),
                     super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        room = self.contentsRect().width()
        metrics = self.fontMetrics()
        text = self._short if self._short and metrics.horizontalAdvance(self._full) > room \
            else self._full
        shown = metrics.elidedText(text, Qt.TextElideMode.ElideMiddle, room)
        if shown != super().text():
            super().setText(shown)
        tip = self._full if shown != self._full else ""
        if tip != self.toolTip():
            self.setToolTip(tip)
