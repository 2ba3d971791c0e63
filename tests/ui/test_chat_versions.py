"""Versions, branches, delete with undo and several answers at once, in the real window:
the `‹ k/n ›` switch, the "⋯" menu of each message, the undo bar and the ×N button."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

import ui.chat.chat_tab as chat_tab_module
from tests.ui.conftest import run_until, spin
from tests.ui.history_checks import assert_tab_saved, stored

CTRL_SHIFT = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier


def click(qtbot, button) -> None:
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def say(loop, tab, text: str) -> None:
    assert tab.send_text(text)
    run_until(loop, lambda: not tab.conversation.is_busy)


def shown(tab) -> list[str]:
    """What the tab's widgets show, message by message."""
    return [w.body.source_text for w in tab.messages.widgets]


def switch_of(tab, index: int):
    return tab.messages.widgets[index].versions


def test_regenerate_keeps_the_old_reply_and_arrows_switch(window, loop, qtbot):
    tab = window.current_tab()
    tab.panel.fields["temperature"].setValue(1.0)  # two different replies
    conv = tab.conversation
    say(loop, tab, "Pick a word")
    first = conv.messages[1]
    assert not switch_of(tab, 1).isVisibleTo(tab)  # one version: no arrows
    assert "kept" in tab.regenerate_button.toolTip()
    click(qtbot, tab.regenerate_button)
    run_until(loop, lambda: not conv.is_busy)
    second = conv.messages[1]
    assert second is not first and first.content and second.content != first.content
    assert conv.tree.siblings(second) == [first, second]  # the old reply is kept
    vs = switch_of(tab, 1)
    assert vs.isVisibleTo(tab) and vs.label.text() == "2/2"
    assert vs.toolTip() == "Version 2 of 2 — switch between the versions"
    assert vs.prev_button.isEnabled() and not vs.next_button.isEnabled()
    assert shown(tab)[1] == second.content
    assert not switch_of(tab, 0).isVisibleTo(tab)  # the question has one version

    click(qtbot, switch_of(tab, 1).prev_button)
    assert conv.messages[1] is first and shown(tab)[1] == first.content
    vs = switch_of(tab, 1)
    assert vs.label.text() == "1/2" and vs.toolTip().startswith("Version 1 of 2")
    assert not vs.prev_button.isEnabled() and vs.next_button.isEnabled()
    click(qtbot, vs.prev_button)  # disabled at the end: nothing changes
    assert conv.messages[1] is first
    click(qtbot, switch_of(tab, 1).next_button)
    assert conv.messages[1] is second and shown(tab)[1] == second.content

    # Regenerate this reply, from its own menu: a third version
    switch_of(tab, 1)  # the widgets were rebuilt: take the new one's menu
    tab.messages.widgets[1].actions_by_name["regenerate"].trigger()
    run_until(loop, lambda: not conv.is_busy)
    assert len(conv.tree.siblings(conv.messages[1])) == 3
    assert switch_of(tab, 1).label.text() == "3/3"


def test_edit_keeps_the_old_branch(window, loop, qtbot):
    tab = window.current_tab()
    conv = tab.conversation
    for text in ("first question", "second question"):
        say(loop, tab, text)
    old = list(conv.messages)
    edit = tab.messages.widgets[0].edit_button
    assert "stay as another version" in edit.toolTip()
    click(qtbot, edit)
    assert "new version" in tab.edit_banner.text()
    tab.input.clear()
    assert tab.send_text("edited question")
    run_until(loop, lambda: not conv.is_busy)
    assert [m.content for m in conv.messages][:1] == ["edited question"]
    assert len(conv.messages) == 2 and switch_of(tab, 0).label.text() == "2/2"

    click(qtbot, switch_of(tab, 0).prev_button)  # the old question, and its whole branch
    assert conv.messages == old
    assert shown(tab) == [m.content for m in old]
    assert switch_of(tab, 0).label.text() == "1/2"


def test_shown_version_comes_back_after_a_restart(history_app, loop, qtbot):
    window = history_app.start(meta_delay_s=0.0)
    tab = window.current_tab()
    tab.panel.fields["temperature"].setValue(1.0)
    conv = tab.conversation
    say(loop, tab, "Pick a word")
    assert tab.regenerate()
    run_until(loop, lambda: not conv.is_busy)
    first, second = conv.tree.siblings(conv.messages[1])
    click(qtbot, switch_of(tab, 1).prev_button)
    assert conv.messages[1] is first
    session_id = conv.session_id
    spin(loop, 0.05)
    history_app.stop()

    window = history_app.start()
    tab = window.current_tab()
    conv = tab.conversation
    assert conv.session_id == session_id
    assert [m.id for m in conv.messages] == [conv.messages[0].id, first.id]
    assert shown(tab)[1] == first.content
    vs = switch_of(tab, 1)
    assert vs.label.text() == "1/2" and vs.next_button.isEnabled()
    click(qtbot, vs.next_button)
    assert conv.messages[1].id == second.id and shown(tab)[1] == second.content


def test_delete_from_here_and_undo(history_app, loop, qtbot, monkeypatch):
    window = history_app.start()
    tab = window.current_tab()
    conv = tab.conversation
    for text in ("one", "two"):
        say(loop, tab, text)
    before = [m.id for m in conv.messages]

    tab.messages.widgets[2].actions_by_name["delete"].trigger()
    assert [m.id for m in conv.messages] == before[:2] and len(tab.messages.widgets) == 2
    assert tab.undo_bar.isVisibleTo(tab)
    assert tab.undo_label.text() == "Deleted 2 messages."
    history_app.history.flush()
    assert_tab_saved(history_app.db, tab)  # the rows are gone from the history too

    click(qtbot, tab.undo_button)
    assert [m.id for m in conv.messages] == before and len(tab.messages.widgets) == 4
    assert shown(tab) == [m.content for m in conv.messages]
    assert not tab.undo_bar.isVisibleTo(tab)
    history_app.history.flush()
    assert_tab_saved(history_app.db, tab)
    s = stored(history_app.db)
    try:
        assert len(s.load_session(conv.session_id).messages) == 4
    finally:
        s.close()

    # The bar goes after a while; Chat → Undo delete (Ctrl+Shift+Z) still undoes
    monkeypatch.setattr(chat_tab_module, "UNDO_MS", 50)
    tab.delete_from(1)
    assert tab.undo_label.text() == "Deleted 3 messages."
    run_until(loop, lambda: not tab.undo_bar.isVisibleTo(tab), timeout=3)
    assert len(conv.messages) == 1
    window.activateWindow()  # shortcuts need an active window
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=3)
    tab.input.setFocus()
    qtbot.keyClick(tab.input, Qt.Key.Key_Z, CTRL_SHIFT)
    assert [m.id for m in conv.messages] == before

    # ...but not from a text field that has something to redo: that is the field's
    tab.delete_from(2)
    qtbot.keyClicks(tab.input, "abc")
    qtbot.keyClick(tab.input, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert tab.input.document().isRedoAvailable()
    qtbot.keyClick(tab.input, Qt.Key.Key_Z, CTRL_SHIFT)
    assert len(conv.messages) == 2 and tab.input.toPlainText() == "abc"
    window.actions_by_name["undo_delete"].trigger()
    assert [m.id for m in conv.messages] == before


def test_delete_is_refused_while_a_reply_runs(window, loop):
    tab = window.current_tab()
    conv = tab.conversation
    say(loop, tab, "hello")
    tab.panel.fields["max_tokens"].setValue(5000)
    assert tab.send_text("tell me more")
    run_until(loop, lambda: len(conv.messages[-1].content) > 3)
    tab.messages.widgets[0].actions_by_name["delete"].trigger()
    assert len(conv.messages) == 4 and len(tab.messages.widgets) == 4
    assert tab.notice.isVisibleTo(tab) and "Stop the reply" in tab.notice.text()
    assert not tab.undo_bar.isVisibleTo(tab)
    tab.stop()
    run_until(loop, lambda: not conv.is_busy)


def test_branch_opens_a_tab_that_reuses_the_cached_prefix(window, loop):
    tab = window.current_tab()
    conv = tab.conversation
    for text in ("Tell me about owls", "And about cats"):
        say(loop, tab, text)
    other = window.new_tab()  # the branch goes right after its chat, not at the end
    window.workspace.set_front(conv)
    tab.messages.widgets[1].actions_by_name["branch"].trigger()

    convs = window.workspace.conversations
    assert len(convs) == 3 and convs[0] is conv and convs[2] is other.conversation
    branch = convs[1]
    assert window.workspace.front is branch and window.current_tab().conversation is branch
    assert [(m.role, m.content) for m in branch.messages] == [
        (m.role, m.content) for m in conv.messages[:2]]
    assert len(conv.messages) == 4  # the chat itself is unchanged
    btab = window.current_tab()
    assert shown(btab) == [m.content for m in conv.messages[:2]]

    say(loop, btab, "What else?")
    reply = branch.messages[-1]
    assert reply.finish_reason == "length" and reply.stats is not None
    assert reply.stats.cached_tokens > 0
    assert "prompt tokens cached" in btab.messages.widgets[-1].stats.text()


def answers_of(tab) -> list:
    return tab.conversation.tree.siblings(tab.conversation.messages[1])


def test_three_answers_at_once(window, loop):
    tab = window.current_tab()
    tab.panel.fields["temperature"].setValue(1.0)
    tab.panel.fields["seed"].setValue(7)
    conv = tab.conversation
    busy: list[bool] = []
    tab.busy_changed.connect(busy.append)
    tab.answers_actions[3].trigger()
    assert tab.answers == 3 and tab.answers_button.text() == "×3"

    assert tab.send_text("Hello")
    assert len(conv.running) == 3 and len(conv.messages) == 2
    assert window.tabs.tabText(0).startswith("●")
    assert switch_of(tab, 1).label.text() == "1/3"  # the first shown, the others beside
    run_until(loop, lambda: not conv.is_busy)
    answers = answers_of(tab)
    assert len(answers) == 3
    assert all(a.finish_reason == "length" and a.content for a in answers)
    assert busy == [True, False]  # one busy mark for all three, cleared once
    assert not window.tabs.tabText(0).startswith("●")
    assert shown(tab)[1] == answers[0].content
    assert [a.params["seed"] for a in answers] == [7, 8, 9]

    # each is the answer one request with seed 7 + i gives
    solo = window.new_tab()
    solo.panel.fields["temperature"].setValue(1.0)
    for i, answer in enumerate(answers):
        solo.panel.fields["seed"].setValue(7 + i)
        if i == 0:
            say(loop, solo, "Hello")
        else:
            assert solo.regenerate()
            run_until(loop, lambda: not solo.conversation.is_busy)
        assert solo.conversation.messages[1].content == answer.content
    assert len({a.content for a in answers}) > 1  # different seeds, different answers

    # Regenerate ×2: two more versions, the first of them shown
    tab.set_answers(2)
    assert tab.regenerate()
    run_until(loop, lambda: not conv.is_busy)
    assert len(answers_of(tab)) == 5 and switch_of(tab, 1).label.text() == "4/5"


def test_stop_during_several_answers_cancels_all(window, loop, qtbot):
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(5000)
    conv = tab.conversation
    busy: list[bool] = []
    tab.busy_changed.connect(busy.append)
    tab.set_answers(3)
    assert tab.send_text("Tell me everything")
    run_until(loop, lambda: all(len(a.content) > 3 for a in answers_of(tab)))

    # the second answer, shown while it streams, keeps streaming into the view
    click(qtbot, switch_of(tab, 1).next_button)
    second = conv.messages[1]
    assert second is answers_of(tab)[1] and second.streaming
    assert switch_of(tab, 1).label.text() == "2/3"
    seen = len(second.content)
    run_until(loop, lambda: len(tab.messages.widgets[1].body.source_text) > seen + 3)

    click(qtbot, tab.send_button)  # Stop
    run_until(loop, lambda: not conv.is_busy)
    answers = answers_of(tab)
    assert [a.finish_reason for a in answers] == ["cancelled"] * 3
    assert all(not a.streaming and 0 < len(a.token_ids or []) < 5000 for a in answers)
    assert busy == [True, False] and tab.send_button.text() == "Send"
    spin(loop, 0.05)
    assert shown(tab)[1] == second.content


def test_switching_an_earlier_version_keeps_the_reader_in_place(window, loop, qtbot):
    """Scrolled up to an earlier message, the reader stays there when a switch rebuilds the
    messages below it (the arrows stay under the pointer); a new message follows again."""
    tab = window.current_tab()
    tab.panel.fields["temperature"].setValue(1.0)
    conv = tab.conversation
    bar = tab.messages.verticalScrollBar()
    say(loop, tab, "q0")
    for version in range(2):  # two versions of the first reply, a long chat below each
        if version:
            assert tab.regenerate(1)
            run_until(loop, lambda: not conv.is_busy)
        for i in range(1, 7):
            say(loop, tab, f"question {i}")
    assert len(conv.messages) == 14 and switch_of(tab, 1).label.text() == "2/2"
    run_until(loop, lambda: bar.maximum() > 300 and bar.value() == bar.maximum())
    bar.setValue(120)  # the reader scrolls up, to the first messages
    spin(loop, 0.05)
    for step in ("prev_button", "next_button"):
        click(qtbot, getattr(switch_of(tab, 1), step))
        spin(loop, 0.1)  # laid out
        assert bar.maximum() > 300 and bar.value() == 120
    say(loop, tab, "one more")  # a new message takes the reader to the bottom again
    run_until(loop, lambda: bar.value() == bar.maximum())
