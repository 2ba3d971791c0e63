"""Issue #46 item 26 (tabs): six tabs whose titles start with the same words (elided alike)
can be told apart: hovering a tab shows its whole title and its number, also for chats
restored after a restart, and the numbers follow when a tab closes."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication, QToolTip

from tests.ui.conftest import run_until

SAME_START = "Write a long story about a lighthouse keeper who finds"
ENDINGS = ("a map", "a cat", "a ship", "a key", "a bell", "a boat")


def hover_tip(qtbot, window, index: int) -> str:
    """The tooltip a pause of the pointer over tab `index` shows."""
    bar = window.tabs.tabBar()
    pos = bar.tabRect(index).center()
    qtbot.mouseMove(bar, pos)
    QApplication.sendEvent(bar, QHelpEvent(QEvent.Type.ToolTip, pos, bar.mapToGlobal(pos)))
    qtbot.waitUntil(QToolTip.isVisible, timeout=2000)
    text = QToolTip.text()
    QToolTip.hideText()
    return text


def test_tabs_with_the_same_start_are_told_apart(history_app, loop, qtbot):
    window = history_app.start()
    for i, ending in enumerate(ENDINGS):
        tab = window.current_tab() if i == 0 else window.new_tab()
        tab.send_text(f"{SAME_START} {ending}")
        run_until(loop, lambda tab=tab: not tab.conversation.is_busy)
    history_app.stop()

    window = history_app.start()  # restored from the history: no title changed since
    assert len(window.chat_tabs()) == 6
    tips = [hover_tip(qtbot, window, i) for i in range(6)]
    for i, (tip, ending) in enumerate(zip(tips, ENDINGS, strict=True)):
        assert f"{SAME_START} {ending}" in tip
        assert f"Tab {i + 1} (Ctrl+{i + 1})" in tip
    qtbot.mouseClick(window.tabs.tabBar().tabButton(
        0, window.tabs.tabBar().ButtonPosition.RightSide), Qt.MouseButton.LeftButton)
    assert len(window.chat_tabs()) == 5
    tip = hover_tip(qtbot, window, 0)  # the tab that was second is now first
    assert f"{SAME_START} {ENDINGS[1]}" in tip and "Tab 1 (Ctrl+1)" in tip
