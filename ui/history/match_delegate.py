"""The History list's Match column: a search hit's snippet with the match in bold (the
snippet comes with app.history.sidebar's MATCH_MARKS around the match; the item's plain
text, for copying and accessibility, has them removed)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, Qt
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QFont,
    QFontMetrics,
    QPainter,
    QPalette,
    QTextDocument,
)
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from app.history.sidebar import MATCH_MARKS

from ..sidebar.delegate import snippet_html

MATCH_ROLE = Qt.ItemDataRole.UserRole + 1  # the snippet with its marks
Index = QModelIndex | QPersistentModelIndex


def plain(snippet: str) -> str:
    """The snippet without its marks."""
    return snippet.replace(MATCH_MARKS[0], "").replace(MATCH_MARKS[1], "")


def match_in_view(snippet: str, fits: Callable[[str], bool]) -> str:
    """`snippet` with words dropped from its start ("…" in their place) until the text up
    to the end of its first match `fits` the column, so a narrow column still shows it."""
    head, mark, rest = snippet.partition(MATCH_MARKS[0])
    if not mark:
        return snippet
    shown = head + rest.partition(MATCH_MARKS[1])[0]
    words = head.split(" ")
    while len(words) > 1 and not fits(plain(shown)):
        words = words[1:]
        head = "…" + " ".join(words).lstrip("…")
        shown = head + rest.partition(MATCH_MARKS[1])[0]
    return head + mark + rest


class MatchDelegate(QStyledItemDelegate):
    def html(self, index: Index, fits: Callable[[str], bool] | None = None) -> str:
        """The snippet as rich text, its match in bold (moved into view when `fits` says
        the text up to it is too wide)."""
        snippet = index.data(MATCH_ROLE) or ""
        return snippet_html(match_in_view(snippet, fits) if fits else snippet)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""  # type: ignore[attr-defined]  # the style draws the row, we the text
        widget = opt.widget  # type: ignore[attr-defined]
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        rect = opt.rect.adjusted(4, 0, -4, 0)  # type: ignore[attr-defined]
        doc = QTextDocument()
        doc.setDefaultFont(opt.font)  # type: ignore[attr-defined]
        doc.setDocumentMargin(0)
        bold = QFont(opt.font)  # type: ignore[attr-defined]
        bold.setBold(True)
        metrics = QFontMetrics(bold)  # bold is the wider: what fits in bold fits
        doc.setHtml(self.html(index, lambda text: metrics.horizontalAdvance(text)
                              <= rect.width() * 0.9))
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)  # type: ignore[attr-defined]
        context = QAbstractTextDocumentLayout.PaintContext()
        context.palette.setColor(QPalette.ColorRole.Text, opt.palette.color(  # type: ignore[attr-defined]
            QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text))
        painter.save()
        top = rect.top() + max(0, (rect.height() - doc.size().height()) / 2)
        painter.translate(rect.left(), top)
        painter.setClipRect(QRectF(0, 0, rect.width(), rect.height()))
        doc.documentLayout().draw(painter, context)
        painter.restore()
