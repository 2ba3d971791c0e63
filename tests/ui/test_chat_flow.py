"""Send, stream, stop, regenerate, edit-and-resend in one tab of the real window."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.conftest import run_until, spin


def type_and_send(qtbot, tab, text: str) -> None:
    tab.input.setFocus()
    qtbot.keyClicks(tab.input, text)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)


def test_send_streams_reply_with_stats(window, loop, qtbot):
    tab = window.current_tab()
    type_and_send(qtbot, tab, "Hello there")
    conv = tab.conversation
    assert [m.role for m in conv.messages] == ["user", "assistant"]
    assert tab.input.toPlainText() == ""
    assert tab.send_button.text() == "Stop"
    assert window.tabs.tabText(0).startswith("●")
    run_until(loop, lambda: not conv.is_busy)
    gen = conv.generations[-1]
    reply = conv.messages[1]
    assert gen.finish_reason == "length"
    assert reply.content == gen.text != ""
    assert len(gen.stream.tokens) == 12
    widget = tab.messages.widgets[1]
    assert widget.body.source_text == gen.text
    stats = widget.stats.text()
    assert "12 tokens" in stats and "tok/s" in stats and "first token" in stats
    assert "length" in stats
    assert tab.send_button.text() == "Send"
    assert not window.tabs.tabText(0).startswith("●")


def test_shift_enter_adds_a_newline(window, loop, qtbot):
    tab = window.current_tab()
    qtbot.keyClicks(tab.input, "line one")
    qtbot.keyClick(tab.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(tab.input, "line two")
    assert tab.input.toPlainText() == "line one\nline two"
    assert tab.conversation.messages == []
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)
    assert tab.conversation.messages[0].content == "line one\nline two"
    run_until(loop, lambda: not tab.conversation.is_busy)


def test_escape_stops_generation(window, loop, qtbot):
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(5000)
    type_and_send(qtbot, tab, "Tell me everything")
    conv = tab.conversation
    run_until(loop, lambda: len(conv.messages[1].content) > 0)
    qtbot.keyClick(tab.input, Qt.Key.Key_Escape)
    run_until(loop, lambda: not conv.is_busy)
    gen = conv.generations[-1]
    assert gen.finish_reason == "cancelled"
    assert 0 < len(gen.stream.tokens) < 5000
    assert conv.messages[1].content == gen.text
    assert "cancelled" in tab.messages.widgets[1].stats.text()


def test_regenerate_adds_a_version_of_the_last_reply(window, loop, qtbot):
    tab = window.current_tab()
    tab.panel.fields["temperature"].setValue(1.0)
    conv = tab.conversation
    type_and_send(qtbot, tab, "Pick a word")
    run_until(loop, lambda: not conv.is_busy)
    first = conv.generations[-1]
    first_reply = conv.messages[1]
    first_prompt = list(first.stream.prompt_tokens)
    assert first_prompt and tab.regenerate_button.isEnabled()
    qtbot.mouseClick(tab.regenerate_button, Qt.MouseButton.LeftButton)
    assert conv.is_busy and conv.generations == [conv.generation]  # the first has ended
    run_until(loop, lambda: not conv.is_busy)
    second = conv.generations[-1]
    assert second.request_id != first.request_id
    assert second.stream.prompt_tokens == first_prompt  # same conversation
    assert [m.role for m in conv.messages] == ["user", "assistant"]
    assert conv.messages[1].content == second.text
    assert len(tab.messages.widgets) == 2
    assert tab.messages.widgets[1].body.source_text == second.text
    # the old reply is kept beside it, as version 1 of 2
    assert conv.tree.siblings(conv.messages[1]) == [first_reply, conv.messages[1]]
    assert first_reply.content == first.text
    assert tab.messages.widgets[1].versions.label.text() == "2/2"


def test_edit_and_resend_replies_from_the_new_version(window, loop, qtbot):
    tab = window.current_tab()
    conv = tab.conversation
    for text in ("first question", "second question"):
        type_and_send(qtbot, tab, text)
        run_until(loop, lambda: not conv.is_busy)
    assert len(conv.messages) == 4
    old = list(conv.messages)
    qtbot.mouseClick(tab.messages.widgets[0].edit_button, Qt.MouseButton.LeftButton)
    assert tab.input.toPlainText() == "first question"
    assert tab.edit_banner.isVisibleTo(tab)
    tab.input.clear()
    type_and_send(qtbot, tab, "edited question")
    assert [m.content for m in conv.messages[:1]] == ["edited question"]
    run_until(loop, lambda: not conv.is_busy)
    assert [m.role for m in conv.messages] == ["user", "assistant"]
    gen = conv.generations[-1]
    assert conv.messages[1].content == gen.text
    prompt = conv.bridge.local.engine.tokenizer.decode(gen.stream.prompt_tokens)
    assert "edited question" in prompt
    assert "first question" not in prompt and "second question" not in prompt
    assert len(tab.messages.widgets) == 2
    assert not tab.edit_banner.isVisibleTo(tab)
    # the old question and its replies stay, as the other version
    assert conv.tree.siblings(conv.messages[0]) == [old[0], conv.messages[0]]
    assert all(m.id in conv.tree.nodes for m in old)


def test_escape_cancels_an_edit(window, loop, qtbot):
    tab = window.current_tab()
    type_and_send(qtbot, tab, "hello")
    run_until(loop, lambda: not tab.conversation.is_busy)
    tab.start_edit(0)
    qtbot.keyClick(tab.input, Qt.Key.Key_Escape)
    assert tab.editing_index is None and tab.input.toPlainText() == ""
    spin(loop, 0.05)
