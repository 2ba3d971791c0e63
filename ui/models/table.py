"""The library's table: one row per ModelEntry, the columns `batchchat models` prints, a
filter over every column, and rows that do not load greyed with the reason as tooltip."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from app.models.entry import ModelEntry

COLUMNS = (("name", "Name"), ("arch", "Architecture"), ("params", "Params"),
           ("quant", "Quantization"), ("size", "Size"), ("context", "Context"),
           ("loads", "Loads"), ("where", "Where"), ("input", "Input"))
ENTRY_ROLE = Qt.ItemDataRole.UserRole + 1
SORT_ROLE = Qt.ItemDataRole.UserRole + 2
Index = QModelIndex | QPersistentModelIndex


class ModelTable(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.entries: list[ModelEntry] = []

    def set_entries(self, entries: Sequence[ModelEntry]) -> None:
        self.beginResetModel()
        self.entries = list(entries)
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.entries)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section][1]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        entry = self.entries[index.row()]
        key = COLUMNS[index.column()][0]
        if role == Qt.ItemDataRole.DisplayRole:
            return entry.row()[key]
        if role == ENTRY_ROLE:
            return entry
        if role == SORT_ROLE:  # numbers sort as numbers
            return {"params": entry.parameters or 0, "size": entry.size_bytes,
                    "context": entry.context_length or 0}.get(key, entry.row()[key].lower())
        if role == Qt.ItemDataRole.ToolTipRole:
            where = str(entry.path or entry.source)
            why = entry.reason or entry.note
            return f"{where}\n{why}" if why else where
        if role == Qt.ItemDataRole.ForegroundRole and not entry.loads:
            return muted_text()
        if role == Qt.ItemDataRole.TextAlignmentRole and key in ("params", "size", "context"):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


def muted_text() -> QColor:
    """Text between the palette's text and background: plainly secondary, still readable
    in both themes (the disabled colour was too faint on white)."""
    palette = QApplication.palette()
    text, base = palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Base)
    mix = 0.6
    return QColor.fromRgbF(*(mix * a + (1 - mix) * b for a, b in (
        (text.redF(), base.redF()), (text.greenF(), base.greenF()),
        (text.blueF(), base.blueF()))))


class ModelFilter(QSortFilterProxyModel):
    """Rows whose any column holds the filter text (case does not matter)."""

    def __init__(self, table: ModelTable) -> None:
        super().__init__()
        self.setSourceModel(table)
        self.setFilterKeyColumn(-1)
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setSortRole(SORT_ROLE)

    def entry(self, row: int) -> ModelEntry:
        return self.data(self.index(row, 0), ENTRY_ROLE)  # type: ignore[no-any-return]
