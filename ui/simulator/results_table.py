"""The simulator's results table: one row per request, added when it is sent ("running")
and filled in when it ends."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtWidgets import QHeaderView, QTableView, QWidget

from app.plural import counted
from app.simulator.run import SimRow

from ..widgets import readonly_table

COLUMNS = ("#", "Prompt", "Reply", "Tokens", "Finish", "Queue", "TTFT", "tok/s")
_NUMERIC = {0, 3, 5, 6, 7}
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
TIP_CHARS = 1500  # a tooltip shows a long prompt or reply, cut here
Index = QModelIndex | QPersistentModelIndex


def _secs(value: float | None) -> str:
    return "" if value is None else f"{value:.2f} s"


def cells(row: SimRow) -> tuple[str, ...]:
    """The row's texts, computed once per change: `data()` runs on every paint."""
    return (
        str(row.index + 1),
        _one_line(row.prompt),
        _one_line(row.reply),
        str(row.output_tokens) if row.finish_reason != "running" or row.output_tokens else "",
        row.finish_reason,
        _secs(row.queue_s),
        _secs(row.ttft_s),
        f"{row.tokens_per_s:.1f}" if row.tokens_per_s else "",
    )


def _one_line(text: str) -> str:
    return " ".join(text[:300].split())


class ResultsModel(QAbstractTableModel):
    """`add(row)` when a request is sent, `update(row)` when it ends; rows by send order."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[SimRow] = []
        self._cells: list[tuple[str, ...]] = []
        self._where: dict[int, int] = {}  # request index -> table row

    def clear(self) -> None:
        self.beginResetModel()
        self.rows, self._cells, self._where = [], [], {}
        self.endResetModel()

    def add(self, row: SimRow) -> None:
        n = len(self.rows)
        self.beginInsertRows(QModelIndex(), n, n)
        self.rows.append(row)
        self._cells.append(cells(row))
        self._where[row.index] = n
        self.endInsertRows()

    def update(self, row: SimRow) -> None:
        r = self._where.get(row.index)
        if r is None:  # ended before its `sent` reached us: never happens, but keep it
            self.add(row)
            return
        self.rows[r] = row
        self._cells[r] = cells(row)
        self.dataChanged.emit(self.index(r, 0), self.index(r, len(COLUMNS) - 1))

    # -- Qt model -----------------------------------------------------------------------
    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt API
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008, N802 - Qt API
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        r, c = index.row(), index.column()
        if not index.isValid() or r >= len(self.rows):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cells[r][c]
        if role == Qt.ItemDataRole.TextAlignmentRole and c in _NUMERIC:
            return _RIGHT
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(self.rows[r], c)
        return None

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802 - Qt API
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    @staticmethod
    def _tooltip(row: SimRow, column: int) -> str | None:
        if column == 1:
            return row.prompt[:TIP_CHARS]
        if column == 2:
            return row.reply[:TIP_CHARS] or None
        if column == 3:
            return f"{counted(row.prompt_tokens, 'prompt token')}, {row.output_tokens} generated"
        if column == 4 and row.error:
            return row.error
        if column == 7:
            return "decode tokens/s after the first token (1 / TPOT)"
        return None


def make_results_view(model: ResultsModel) -> QTableView:
    view = readonly_table(model, "simResultsTable", (36, 180, 160, 52, 64, 62, 62, 50))
    header = view.horizontalHeader()
    header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)  # the reply takes the rest
    header.setMinimumSectionSize(30)
    return view
