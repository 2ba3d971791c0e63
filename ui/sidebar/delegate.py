"""Paints the sidebar's rows: a group's name, or a chat's title, open mark and preview
(a search hit's snippet instead, its match in bold, on up to two lines)."""

from __future__ import annotations

import html

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from app.history.sidebar import MATCH_MARKS, ChatRow, Header

ENTRY_ROLE = Qt.ItemDataRole.UserRole  # an item's Header or ChatRow
PAD = 10
MARK = 7  # the open-in-a-tab dot's size
Index = QModelIndex | QPersistentModelIndex


def snippet_html(snippet: str) -> str:
    """The snippet escaped, its marked match in bold."""
    text = html.escape(snippet)
    return text.replace(MATCH_MARKS[0], "<b>").replace(MATCH_MARKS[1], "</b>")


class RowDelegate(QStyledItemDelegate):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:  # noqa: N802
        fm = QFontMetrics(option.font)  # type: ignore[attr-defined]
        entry = index.data(ENTRY_ROLE)
        if isinstance(entry, Header):
            return QSize(100, fm.height() + 14)
        lines = 3 if isinstance(entry, ChatRow) and entry.snippet else 2
        return QSize(100, lines * fm.lineSpacing() + 12)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        entry = index.data(ENTRY_ROLE)
        rect: QRect = option.rect  # type: ignore[attr-defined]
        palette: QPalette = option.palette  # type: ignore[attr-defined]
        painter.save()
        try:
            if isinstance(entry, Header):
                self._header(painter, rect, option.font, palette, entry)  # type: ignore[attr-defined]
            elif isinstance(entry, ChatRow):
                style = option.widget.style() if option.widget else None  # type: ignore[attr-defined]
                if style is not None:  # selection and hover, as the style draws them
                    style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, option,
                                        painter, option.widget)  # type: ignore[attr-defined]
                selected = bool(option.state & QStyle.StateFlag.State_Selected)  # type: ignore[attr-defined]
                self._chat(painter, rect, option.font, palette, entry, selected)  # type: ignore[attr-defined]
        finally:
            painter.restore()

    def _header(self, painter: QPainter, rect: QRect, font: QFont, palette: QPalette,
                header: Header) -> None:
        bold = QFont(font)
        bold.setBold(True)
        bold.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
        painter.setFont(bold)
        painter.setPen(_dim(palette))
        painter.drawText(rect.adjusted(PAD, 6, -PAD, 0),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         header.label.upper())

    def _chat(self, painter: QPainter, rect: QRect, font: QFont, palette: QPalette,
              row: ChatRow, selected: bool) -> None:
        fm = QFontMetrics(font)
        top = rect.top() + 6
        left = rect.left() + PAD
        width = rect.width() - 2 * PAD
        text_role = (QPalette.ColorRole.HighlightedText if selected
                     else QPalette.ColorRole.Text)
        title_font = QFont(font)
        title_font.setWeight(QFont.Weight.DemiBold)
        title_fm = QFontMetrics(title_font)
        if row.is_open:  # a dot after the title: a tab shows this chat
            width -= MARK + 6
        title = title_fm.elidedText(row.title, Qt.TextElideMode.ElideRight, width)
        painter.setFont(title_font)
        painter.setPen(palette.color(text_role))
        painter.drawText(QRect(left, top, width, fm.lineSpacing()),
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, title)
        if row.is_open:
            x = left + title_fm.horizontalAdvance(title) + 6
            y = top + (fm.lineSpacing() - MARK) // 2
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(palette.color(text_role if selected
                                           else QPalette.ColorRole.Highlight))
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.drawEllipse(x, y, MARK, MARK)
        second = QRect(left, top + fm.lineSpacing(), rect.width() - 2 * PAD,
                       rect.bottom() - top - fm.lineSpacing() - 4)
        colour = palette.color(text_role) if selected else _dim(palette)
        painter.setFont(font)
        if row.snippet:
            self._snippet(painter, second, font, colour, row.snippet)
            return
        painter.setPen(colour)
        preview = fm.elidedText(row.preview, Qt.TextElideMode.ElideRight, second.width())
        painter.drawText(second, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop,
                         preview)

    def _snippet(self, painter: QPainter, rect: QRect, font: QFont, colour: QColor,
                 snippet: str) -> None:
        doc = QTextDocument()
        doc.setDefaultFont(font)
        doc.setDocumentMargin(0)
        doc.setTextWidth(rect.width())
        doc.setHtml(f'<span style="color:{colour.name()}">{snippet_html(snippet)}</span>')
        painter.translate(rect.topLeft())
        painter.setClipRect(QRect(0, 0, rect.width(), rect.height()))
        doc.drawContents(painter)


def _dim(palette: QPalette) -> QColor:
    """Secondary text: between the text and the background, readable in both looks."""
    text, base = palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.Base)
    return QColor((text.red() * 3 + base.red() * 2) // 5,
                  (text.green() * 3 + base.green() * 2) // 5,
                  (text.blue() * 3 + base.blue() * 2) // 5)
