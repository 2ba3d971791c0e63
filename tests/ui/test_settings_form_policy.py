"""Issue #46 item 26 (settings panel): one form layout policy: at 900x600 the settings
panel puts every label above its field, or every label beside it, never a mix (row by row,
the longer labels went above their fields and the shorter ones beside)."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QSplitter

from tests.ui.conftest import run_until, spin


def labels_above(panel) -> list[bool]:
    """For each number setting: is its label above its field (else beside it)?"""
    out = []
    for key, box in panel.fields.items():
        label = panel.labels[key]
        label_bottom = label.mapTo(panel, label.rect().bottomLeft()).y()
        field_top = box.mapTo(panel, box.rect().topLeft()).y()
        out.append(label_bottom <= field_top)
    return out


def drag_panel_to(qtbot, tab, width: int) -> None:
    """Drag the handle between the chat and the settings panel until the panel is about
    `width` wide (as far as the chat's minimum lets it)."""
    splitter = tab.panel_area.parentWidget()
    assert isinstance(splitter, QSplitter)
    handle = splitter.handle(1)
    start = handle.rect().center()
    dx = tab.panel_area.width() - width
    qtbot.mousePress(handle, Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(handle, start + QPoint(dx, 0))
    qtbot.mouseRelease(handle, Qt.MouseButton.LeftButton, pos=start + QPoint(dx, 0))


def test_one_label_policy_at_every_width(window, loop, qtbot):
    tab = window.current_tab()
    qtbot.mouseClick(tab.settings_button, Qt.MouseButton.LeftButton)
    run_until(loop, tab.panel.isVisible)
    for size in ((900, 600), (1200, 780)):
        window.resize(*size)
        for width in (200, 230, 260, 290, 320, 380):
            drag_panel_to(qtbot, tab, width)
            spin(loop, 0.05)
            above = labels_above(tab.panel)
            assert all(above) or not any(above), (size, width, above)
