"""Issue #46 item 24: undoing a sidebar delete puts the chat's tab back where it was, not
last."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.conftest import run_until


def test_undo_puts_the_tab_back_in_its_place(history_app, loop, qtbot):
    window = history_app.start()
    convs = []
    for text in ("first chat", "middle chat", "last chat"):
        tab = window.current_tab() if not convs else window.new_tab()
        tab.send_text(text)
        run_until(loop, lambda tab=tab: not tab.conversation.is_busy)
        convs.append(tab.conversation)
    middle = convs[1].session_id
    view = window.sidebar.list
    run_until(loop, lambda: view.item_for(middle) is not None)
    view.setCurrentItem(view.item_for(middle))
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_Delete)
    assert [c.session_id for c in window.workspace.conversations] == [
        convs[0].session_id, convs[2].session_id]
    qtbot.mouseClick(window.sidebar.undo_bar.button, Qt.MouseButton.LeftButton)
    titles = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert titles == ["first chat", "middle chat", "last chat"]
    assert [c.session_id for c in window.workspace.conversations] == [
        c.session_id for c in convs]
