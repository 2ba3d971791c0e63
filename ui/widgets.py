"""Small widget builders shared by the settings panel, the simulator form and the tables."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QAbstractItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
    QHeaderView,
    QSpinBox,
    QTableView,
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
