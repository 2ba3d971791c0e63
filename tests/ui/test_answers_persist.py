"""Issue #46 item 25: the ×N choice holds for the tab across a restart (it came back ×1):
saved with the chat's settings in the history, and Send then asks for that many again."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.conftest import run_until


def pick_answers(qtbot, tab, n: int) -> None:
    """Click ×N, then "n answers at once" in its menu."""
    button, action = tab.answers_button, tab.answers_actions[n]
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    menu = button.menu()
    qtbot.waitUntil(menu.isVisible, timeout=2000)
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())


def test_the_answers_choice_comes_back_after_a_restart(history_app, loop, qtbot):
    window = history_app.start(meta_delay_s=0.0)
    tab = window.current_tab()
    tab.send_text("one question")
    run_until(loop, lambda: not tab.conversation.is_busy)
    pick_answers(qtbot, tab, 3)
    assert tab.answers_button.text() == "×3"
    session_id = tab.conversation.session_id
    history_app.stop()

    window = history_app.start()
    tab = window.current_tab()
    assert tab.conversation.session_id == session_id
    assert tab.answers_button.text() == "×3" and tab.answers_actions[3].isChecked()
    assert "answers" not in tab.conversation.params  # not a sampling setting
    assert tab.send_text("three answers please")
    parent = tab.conversation.messages[-2]
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert len(tab.conversation.tree.children(parent.id)) == 3
