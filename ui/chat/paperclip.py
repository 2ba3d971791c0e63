"""A paperclip icon drawn with QPainter (no emoji font can be counted on: the Xvfb and many
Linux desktops have none), in a grey that reads on the light and the dark look."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPainterPath, QPen, QPixmap

GREY = "#80868b"


def paperclip_icon(size: int = 32, colour: str = GREY) -> QIcon:
    pix = QPixmap(size, size)
    pix.fill(Qt.GlobalColor.transparent)
    p = QPainter(pix)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    pen = QPen(QColor(colour), size / 14)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    p.setPen(pen)
    s = size / 32
    path = QPainterPath(QPointF(20 * s, 10 * s))
    # the inner wire up, over the top, the outer wire down, round the bottom, and up again
    path.lineTo(20 * s, 22 * s)
    path.arcTo(QRectF(12 * s, 18 * s, 8 * s, 8 * s), 0, -180)
    path.lineTo(12 * s, 8 * s)
    path.arcTo(QRectF(12 * s, 3 * s, 12 * s, 10 * s), 180, -180)
    path.lineTo(24 * s, 23 * s)
    path.arcTo(QRectF(8 * s, 15 * s, 16 * s, 14 * s), 0, -180)
    path.lineTo(8 * s, 11 * s)
    p.drawPath(path)
    p.end()
    return QIcon(pix)
