"""Chart colours for the light and dark looks (pyqtgraph draws its own, outside the
stylesheet and the palette)."""

from __future__ import annotations

import pyqtgraph as pg

# (background, title, axis text, axis line) per look
_LOOKS = {False: ("#ffffff", "#3c4043", "#5f6368", "#c0c4c8"),
          True: ("#23262b", "#e3e6ea", "#a8adb3", "#4a4f57")}


def style_plot(widget: pg.PlotWidget, dark: bool) -> None:
    """Colour `widget` for the look; its title and axis labels keep their text."""
    background, title, text, line = _LOOKS[dark]
    widget.setBackground(background)
    item = widget.getPlotItem()
    if item.titleLabel.text:
        item.setTitle(item.titleLabel.text, size="9pt", color=title)
    for name in ("left", "bottom"):
        axis = item.getAxis(name)
        axis.setTextPen(text)
        axis.setPen(line)
        if axis.labelText:
            axis.setLabel(axis.labelText, units=axis.labelUnits or None, color=text)
    if item.legend is not None:
        item.legend.setLabelTextColor(title)
