"""Compare (ui/compare): one message to several targets side by side, in the real window on
the tiny model. Two local presets stream at once into two columns, each token for token what
a request alone with that preset gives; a remote target that is down, or refused, fails in
its own column while the local one finishes; Stop stops all; the pick is shown in the tab,
the other answers stay as versions, and the history keeps them all across a restart."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from app.remote import Connection
from app.request.tab import tab_request
from tests.remote.broken_server import BrokenServer
from ui.chat.message_view import stats_text
from ui.compare import open_compare
from ui.compare.column import COLUMN_MIN_WIDTH
from ui.compare.dialog import CompareDialog
from ui.compare.targets import MAX_TARGETS

from .conftest import FAST, run_until, spin

SAMPLED = FAST | {"temperature": 0.9, "top_k": 40, "seed": 7, "max_tokens": 10}
# long enough to stream over several frames (the tiny model writes 12 tokens in one)
GREEDY_LONG = FAST | {"max_tokens": 300}
SAMPLED_LONG = SAMPLED | {"max_tokens": 250}
LONG = FAST | {"max_tokens": 5000}


def pick(dialog: CompareDialog, *labels: str) -> None:
    """As many target rows as labels, each set to that label's entry (as a click would)."""
    rows = dialog.target_list
    while len(rows.rows) < len(labels):
        rows.add_row()
    for row, label in zip(rows.rows, labels, strict=True):
        index = row.combo.findText(label)
        assert index >= 0, f"{label!r} is offered"
        row.combo.setCurrentIndex(index)
        row.combo.activated.emit(index)


def solo_tokens(ctx: Any, loop: Any, prompt: list[dict], params: dict) -> list[int]:
    """The token ids one request alone gives for this prompt and settings."""
    gen = ctx.bridge.submit(tab_request(prompt, params))
    run_until(loop, lambda: gen.is_finished)
    assert gen.finish_reason == "length"
    return gen.tokens


def test_two_presets_stream_at_once_and_one_is_picked(window, loop, settings, qtbot):
    settings.user_presets["Greedy"] = dict(GREEDY_LONG)
    settings.user_presets["Sampled"] = dict(SAMPLED_LONG)
    tab = window.current_tab()
    tab.input.setPlainText("Tell me two things")
    window.actions_by_name["compare"].trigger()  # Chat → Compare…
    dialog = tab.findChild(CompareDialog)
    assert dialog is not None and dialog.isVisible()
    assert dialog.message_box.toPlainText() == "Tell me two things"  # the input box's text
    assert dialog.target_list.targets()[0].label == "Local · Fast"  # the tab's own preset
    pick(dialog, "Local · Greedy", "Local · Sampled")

    conv = tab.conversation
    both_streaming: list[bool] = []  # at each delta: were both replies mid-stream?
    conv.message_changed.connect(lambda _m, what: what == "text" and both_streaming.append(
        sum(m.streaming and bool(m.content) for m in conv.tree.nodes.values()) == 2))
    qtbot.mouseClick(dialog.send_button, Qt.MouseButton.LeftButton)
    assert dialog.stack.currentIndex() == 1 and len(dialog.columns) == 2
    assert tab.input.toPlainText() == ""  # sent, as Send clears it
    assert len(conv.running) == 2
    run_until(loop, lambda: not conv.is_busy)
    assert any(both_streaming)  # streamed side by side, not one after the other

    user = conv.tree.nodes[conv.messages[0].id]
    replies = conv.tree.children(user.id)
    assert [c.message for c in dialog.columns] == replies
    prompt = conv.prompt_messages(user)
    for column, params in zip(dialog.columns, (GREEDY_LONG, SAMPLED_LONG), strict=True):
        msg = column.message
        assert msg.params == params and msg.finish_reason == "length"
        assert column.text == msg.content != ""
        assert column.title.full_text() == column.target.label
        assert column.model.full_text() == window.ctx.bridge.description
        assert column.stats.text() == stats_text(msg)
        assert msg.stats.generated_tokens == params["max_tokens"]
        assert msg.token_ids == solo_tokens(window.ctx, loop, prompt, params)
        assert column.continue_button.isEnabled()
    assert replies[0].token_ids != replies[1].token_ids  # different settings, other answers
    assert not dialog.stop_button.isEnabled()

    # Continue with the second: the tab shows it, the first stays as the other version
    qtbot.mouseClick(dialog.columns[1].continue_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: not any(d.isVisible() for d in tab.findChildren(CompareDialog)))
    assert conv.messages[-1] is replies[1] and conv.versions(1) == (2, 2)
    assert tab.messages.widgets[-1].message is replies[1]
    assert tab.messages.widgets[-1].body.source_text == replies[1].content
    assert tab.send_text("and then?")  # the chat goes on from the pick
    assert conv.messages[1] is replies[1] and conv.messages[2].parent_id == replies[1].id
    run_until(loop, lambda: not conv.is_busy)
    assert conv.switch_version(1, -1) and conv.messages[1] is replies[0]


def test_a_remote_target_that_is_down_fails_in_its_column(window, loop, settings, qtbot):
    settings.set_connections([
        Connection("http://127.0.0.1:9", model="m", name="nowhere", connect_timeout_s=2),
        Connection("http://127.0.0.1:9", model="m", name="deleted"),
    ])
    tab = window.current_tab()
    dialog = open_compare(tab)
    pick(dialog, "Local · Fast", "nowhere", "deleted")
    # deleted before Send: refused at once, the others still go
    settings.set_connections([settings.connection("nowhere")])
    dialog.message_box.setPlainText("Anyone there?")
    assert dialog.send()
    local, down, refused = dialog.columns
    assert refused.message is None and "'deleted' no longer exists" in refused.text
    assert refused.stats.text() == "refused" and not refused.continue_button.isEnabled()
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert local.message.finish_reason == "length" and local.message.stats.generated_tokens == 12
    assert local.text == local.message.content != "" and local.continue_button.isEnabled()
    assert down.message.finish_reason == "error" and down.message.backend == "nowhere"
    assert "cannot reach" in down.stats.text() and down.stats.property("failed") == "true"
    assert down.text == f"**No answer:** {down.message.error}"
    assert not down.continue_button.isEnabled()  # nothing to continue from
    assert len(tab.conversation.tree.children(tab.conversation.messages[0].id)) == 2


def test_a_refused_remote_request_fails_in_its_column(window, loop, settings, qtbot):
    server = BrokenServer()
    loop.run_until_complete(server.start())
    try:
        settings.set_connections([Connection(server.url, model="ok", api_key="wrong",
                                             name="locked")])
        tab = window.current_tab()
        dialog = open_compare(tab)
        pick(dialog, "locked", "Local · Fast")
        dialog.message_box.setPlainText("Let me in")
        assert dialog.send()
        run_until(loop, lambda: not tab.conversation.is_busy)
        locked, local = dialog.columns
        assert locked.message.finish_reason == "error"
        assert "not authorized (401)" in locked.text and "not authorized" in locked.stats.text()
        assert local.message.finish_reason == "length" and local.text == local.message.content
    finally:
        loop.run_until_complete(server.stop())


def test_stop_all_cancels_every_reply(window, loop, settings, qtbot):
    settings.user_presets["Long"] = dict(LONG)
    settings.user_presets["Long sampled"] = LONG | {"temperature": 0.8, "seed": 3}
    tab = window.current_tab()
    dialog = open_compare(tab)
    pick(dialog, "Local · Long", "Local · Long sampled", "Local · Long")
    dialog.message_box.setPlainText("Go on and on")
    assert dialog.send()
    conv = tab.conversation
    run_until(loop, lambda: all(c.message.content for c in dialog.columns))
    assert dialog.stop_button.isEnabled() and len(conv.running) == 3
    qtbot.mouseClick(dialog.stop_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: not conv.is_busy)
    for column in dialog.columns:
        assert column.message.finish_reason == "cancelled"
        assert column.message.stats.generated_tokens < 5000
        assert column.stats.text() == stats_text(column.message)
    assert not dialog.stop_button.isEnabled()
    dialog.close()  # closing keeps every answer: they are versions in the tab
    assert conv.versions(1) == (1, 3)

    # Esc stops too (as in the tab), and only a second Esc closes the view
    dialog = open_compare(tab)
    pick(dialog, "Local · Long", "Local · Long sampled")
    dialog.message_box.setPlainText("Once more")
    assert dialog.send()
    run_until(loop, lambda: all(c.message.content for c in dialog.columns))
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    run_until(loop, lambda: not conv.is_busy)
    assert [c.message.finish_reason for c in dialog.columns] == ["cancelled"] * 2
    assert dialog.isVisible()
    qtbot.keyClick(dialog, Qt.Key.Key_Escape)
    run_until(loop, lambda: not any(d.isVisible() for d in tab.findChildren(CompareDialog)))


def test_setup_rows_and_refusals(window, loop, settings, qtbot):
    window.resize(900, 600)
    tab = window.current_tab()
    dialog = open_compare(tab)
    assert dialog.width() <= 900 and dialog.height() <= 600
    rows = dialog.target_list
    assert len(rows.rows) == 2 and not rows.rows[0].remove_button.isEnabled()
    while rows.add_row() is not None:
        pass
    assert len(rows.rows) == MAX_TARGETS and not rows.add_button.isEnabled()
    rows.remove_row(rows.rows[1])
    assert len(rows.rows) == MAX_TARGETS - 1 and rows.add_button.isEnabled()
    rows.add_row()
    assert not dialog.send() and "Write the message" in dialog.error.text()
    assert not tab.conversation.tree.nodes  # nothing sent

    tab.send_text("busy first")
    dialog.message_box.setPlainText("x")
    assert not dialog.send() and "still generating" in dialog.error.text()
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert dialog.send()
    assert open_compare(tab) is dialog  # one view per tab: the open one comes to the front
    dialog.show()
    spin(loop, 0.05)  # laid out
    sizes = dialog.split.sizes()
    assert len(sizes) == MAX_TARGETS and min(sizes) >= COLUMN_MIN_WIDTH
    assert all(c.continue_button.isVisible() for c in dialog.columns)
    run_until(loop, lambda: not tab.conversation.is_busy)
    renders = [c.body.num_renders for c in dialog.columns]
    window.set_theme("dark" if not window.theme.dark else "light")  # code colours follow
    assert all(c.body.num_renders > n for c, n in zip(dialog.columns, renders, strict=True))
    dialog.close()
    assert open_compare(tab) is not dialog  # closed: a new one


def test_history_keeps_every_answer_and_the_pick(history_app, loop, qtbot):
    history_app.settings.user_presets["Sampled"] = dict(SAMPLED)
    window = history_app.start()
    tab = window.current_tab()
    dialog = open_compare(tab)
    pick(dialog, "Local · Fast", "Local · Sampled")
    dialog.message_box.setPlainText("Keep both")
    assert dialog.send()
    conv = tab.conversation
    run_until(loop, lambda: not conv.is_busy)
    picked, other = dialog.columns[1].message, dialog.columns[0].message
    dialog.continue_with(picked)
    session_id = conv.session_id
    history_app.stop()

    window = history_app.start()  # a restart on the same database
    tab = next(t for t in window.chat_tabs() if t.conversation.session_id == session_id)
    conv = tab.conversation
    assert [m.content for m in conv.messages] == ["Keep both", picked.content]
    assert conv.versions(1) == (2, 2)
    saved = {m.id: m for m in conv.tree.nodes.values()}
    for msg in (picked, other):
        assert saved[msg.id].content == msg.content and saved[msg.id].params == msg.params
        assert saved[msg.id].parent_id == conv.messages[0].id
        assert saved[msg.id].token_ids == msg.token_ids
