"""The per-request table of the stats panel: a model whose rows are reused between updates."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QTableView, QWidget

from app.stats.model import TableRow

from ..widgets import readonly_table

COLUMNS = ("Source", "State", "Prompt", "Cached", "Generated", "TTFT", "tok/s", "Finish")
NUMBERS = range(2, 7)  # right-aligned columns
CACHED_TIP = "prompt tokens reused from the engine's prefix cache (not computed)"
_RIGHT = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter


def cell(row: TableRow, column: int) -> str:
    if column == 0:
        return row.source
    if column == 1:
        return row.state
    if column == 2:
        return str(row.prompt_tokens)
    if column == 3:  # the cache is looked up at admission: nothing to say while queued
        return "" if row.state == "queued" else str(row.cached_tokens)
    if column == 4:
        return str(row.generated_tokens)
    if column == 5:
        return "" if row.ttft_s is None else f"{row.ttft_s:.2f} s"
    if column == 6:
        return f"{row.tokens_per_s:.1f}" if row.tokens_per_s else ""
    return row.finish_reason or ""


class RequestTableModel(QStandardItemModel):
    """Cells live in C++ (QStandardItem), so painting the table calls no Python: under
    load each call back into Python may wait for the GIL. `set_rows` reuses the items,
    sets only the texts that changed, and adds or removes rows only at the end (the scroll
    position stays)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(COLUMNS))
        self.horizontalHeaderItem(COLUMNS.index("Cached")).setToolTip(CACHED_TIP)
        self.rows: list[TableRow] = []

    def set_rows(self, rows: Sequence[TableRow]) -> None:
        old, new = self.rowCount(), len(rows)
        if new < old:
            self.removeRows(new, old - new)
        for _ in range(old, new):
            items = [QStandardItem() for _ in COLUMNS]
            for column in NUMBERS:
                items[column].setTextAlignment(_RIGHT)
            self.appendRow(items)
        for r, row in enumerate(rows):
            if r < len(self.rows) and self.rows[r] == row:
                continue
            for column in range(len(COLUMNS)):
                item = self.item(r, column)
                text = cell(row, column)
                if item.text() != text:
                    item.setText(text)
            self.item(r, 0).setToolTip(f"{row.source}\nrequest {row.request_id}")
        self.rows = list(rows)


def make_table_view(model: RequestTableModel) -> QTableView:
    view = readonly_table(model, "requestTable", (120, 80, 56, 56, 70, 64, 56))
    view.horizontalHeader().setStretchLastSection(True)
    # a long title keeps its end: "Tell me…lighthouses (closed)"
    view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    return view
