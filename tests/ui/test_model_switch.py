"""Issue #32 item 2: switching the model never loses work. With replies running, the window
asks (let them finish / stop them / cancel); each answer is followed with a reply really
streaming, then its final state and text, then which model serves. Without running replies
it loads straight away; a failed load keeps the previous model serving."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication

from app.bridge import SWITCHED, BridgeState, Choice
from app.conversation import FINISH_NOTES
from app.settings import Settings
from tests.api_clients import openai_client
from ui.chat.message_view import stats_text
from ui.model_switch import SwitchQuestion

from .conftest import run_until
from .history_checks import stored

REPLY_TOKENS = 1200  # streaming still when the question comes and the test looks
LONG_REPLY = 5000  # still streaming when a test stops it, however busy the machine


class Loader:
    """The app's loader in a test: records what the running reply looked like when a load
    began (on the loading thread), then builds a fresh tiny engine (or fails)."""

    def __init__(self, make_engine: Any, fail: str = "") -> None:
        self.make_engine = make_engine
        self.fail = fail
        self.calls: list[tuple[str, bool]] = []  # (source, a reply was still streaming)
        self.watch: Any = None  # the reply message to look at
        self.lock = threading.Lock()

    def __call__(self, source: str) -> Any:
        with self.lock:
            self.calls.append((source, self.watch is not None and self.watch.streaming))
        if self.fail:
            raise RuntimeError(self.fail)
        return self.make_engine(context_length=8192)


def streaming_reply(tab: Any, loop: Any, text: str = "Tell a long story",
                    tokens: int = REPLY_TOKENS) -> Any:
    """Send `text` and wait until its reply has streamed a little; its message."""
    tab.panel.fields["max_tokens"].setValue(tokens)
    assert tab.send_text(text)
    msg = tab.conversation.messages[-1]
    run_until(loop, lambda: len(msg.content) > 3)
    assert msg.streaming
    return msg


def ask(window: Any, loop: Any, source: str) -> tuple[Any, SwitchQuestion]:
    """Start a load with a reply running: the question opens (the load waits for it)."""
    task = window.load_model(source)
    run_until(loop, lambda: window.switch_question is not None)
    box = window.switch_question
    assert box.isVisible() and not task.done()
    return task, box


def answer_is_served(window: Any, loop: Any, text: str = "and now?") -> Any:
    """A new chat is answered (to the end) by the model serving now; its message."""
    tab = window.new_tab()
    assert tab.send_text(text)
    run_until(loop, lambda: not tab.conversation.is_busy)
    msg = tab.conversation.messages[-1]
    assert msg.finish_reason == "length" and msg.content
    return msg


def test_nothing_running_loads_at_once_without_asking(window, loop, make_engine):
    bridge = window.ctx.bridge
    loader = Loader(make_engine)
    bridge.loader = loader
    old = bridge.local.engine
    task = window.load_model("next-model")
    assert window.switch_question is None  # no question
    assert loop.run_until_complete(task) is True
    assert window.findChild(SwitchQuestion) is None
    assert loader.calls == [("next-model", False)]
    assert bridge.source == "next-model" and bridge.local.engine is not old
    assert not old.running
    answer_is_served(window, loop)


def test_let_them_finish_then_switch(window, loop, make_engine):
    bridge = window.ctx.bridge
    loader = Loader(make_engine)
    bridge.loader = loader
    old = bridge.local.engine
    tab = window.current_tab()
    msg = streaming_reply(tab, loop)
    loader.watch = msg
    task, box = ask(window, loop, "next-model")
    # it says how many replies run and where
    assert f"1 reply is running: 1 in “{tab.conversation.title}”" in box.informativeText()
    assert box.buttons[Choice.FINISH].text() == "Let it finish, then switch"
    box.buttons[Choice.FINISH].click()
    run_until(loop, lambda: bridge.pending_switch is not None)
    # while it waits: the banner says so, the reply streams on, new sends are refused
    banner = window.banner
    run_until(loop, lambda: banner.isVisibleTo(window) and banner.cancel_switch.isVisible())
    assert banner.label.text().startswith("Switching to next-model once the running replies "
                                          f"finish (1 in “{tab.conversation.title}”)")
    other = window.new_tab()
    other.input.setPlainText("a new message meanwhile")
    other._send_or_stop()  # Send
    assert "Switching to next-model" in other.notice.text()
    assert other.input.toPlainText() == "a new message meanwhile"  # kept to send again
    assert not other.conversation.messages  # nothing added
    assert msg.streaming and not loader.calls  # not loading yet
    assert loop.run_until_complete(task) is True
    # the reply ran to its end on the old model; the load began only after that
    assert msg.finish_reason == "length" and msg.stats.generated_tokens == REPLY_TOKENS
    assert loader.calls == [("next-model", False)]
    assert bridge.source == "next-model" and bridge.local.engine is not old
    assert not banner.isVisibleTo(window)
    assert other.send_text("a new message meanwhile")  # the new model takes it
    run_until(loop, lambda: not other.conversation.is_busy)
    assert other.conversation.messages[-1].finish_reason == "length"


def test_stop_them_and_switch(window, loop, make_engine):
    bridge = window.ctx.bridge
    loader = Loader(make_engine)
    bridge.loader = loader
    old = bridge.local.engine
    tab = window.current_tab()
    msg = streaming_reply(tab, loop, tokens=LONG_REPLY)
    gen = tab.conversation.generation
    loader.watch = msg
    task, box = ask(window, loop, "next-model")
    box.buttons[Choice.STOP].click()
    assert loop.run_until_complete(task) is True
    # stopped before the load, its text kept, and it says why (not "the engine shut down")
    assert loader.calls == [("next-model", False)]
    assert msg.finish_reason == SWITCHED and not msg.streaming
    assert msg.content and msg.content == gen.text
    assert 0 < msg.stats.generated_tokens < LONG_REPLY
    shown = tab.messages.widgets[-1].stats.text()
    assert shown == stats_text(msg) and FINISH_NOTES[SWITCHED] in shown
    assert "shut down" not in shown
    assert bridge.source == "next-model" and bridge.local.engine is not old
    answer_is_served(window, loop)


def test_cancel_changes_nothing(window, loop, make_engine):
    bridge = window.ctx.bridge
    loader = Loader(make_engine)
    bridge.loader = loader
    old = bridge.local.engine
    tab = window.current_tab()
    msg = streaming_reply(tab, loop)
    task, box = ask(window, loop, "next-model")
    box.buttons[None].click()
    assert loop.run_until_complete(task) is False
    assert bridge.pending_switch is None and bridge.state == BridgeState.READY
    assert bridge.source == "tiny" and bridge.local.engine is old
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert msg.finish_reason == "length" and msg.stats.generated_tokens == REPLY_TOKENS
    assert not loader.calls
    assert window.ctx.settings.model != "next-model"


def test_a_failed_load_after_waiting_keeps_the_previous_model(window, loop, make_engine):
    bridge = window.ctx.bridge
    loader = Loader(make_engine, fail="out of memory")
    bridge.loader = loader
    old = bridge.local.engine
    tab = window.current_tab()
    msg = streaming_reply(tab, loop)
    task, box = ask(window, loop, "/big/model")
    box.buttons[Choice.FINISH].click()
    assert loop.run_until_complete(task) is False
    assert msg.finish_reason == "length"  # it finished first
    assert [c[0] for c in loader.calls] == ["/big/model"]
    assert bridge.state == BridgeState.READY and bridge.local.engine is old and old.running
    assert "out of memory" in bridge.load_error
    assert "Still using" in window.banner.label.text()
    again = answer_is_served(window, loop)
    assert again.answered_by == bridge.description


def test_replies_started_while_it_loads_finish_before_the_swap(window, loop, make_engine):
    """The model in use answers while the next one loads (issue #18); a reply it is still
    writing when the load is done is let finish (the swap waits), not cut."""
    bridge = window.ctx.bridge
    go = threading.Event()
    started = threading.Event()

    def slow(source: str) -> Any:
        started.set()
        assert go.wait(20)
        return make_engine(context_length=8192)

    bridge.loader = slow
    task = window.load_model("next-model")  # nothing runs: no question
    run_until(loop, started.is_set)
    tab = window.current_tab()
    msg = streaming_reply(tab, loop)
    go.set()
    run_until(loop, lambda: bridge.pending_switch is not None
              and bridge.pending_switch.phase == "swapping")
    assert "has loaded; switching once the replies started meanwhile finish" \
        in window.banner.label.text()
    assert msg.streaming
    assert loop.run_until_complete(task) is True
    assert msg.finish_reason == "length" and msg.stats.generated_tokens == REPLY_TOKENS
    assert bridge.source == "next-model"


def test_stop_them_now_from_the_banner(window, loop, make_engine):
    bridge = window.ctx.bridge
    bridge.loader = Loader(make_engine)
    tab = window.current_tab()
    msg = streaming_reply(tab, loop, tokens=LONG_REPLY)
    task, box = ask(window, loop, "next-model")
    box.buttons[Choice.FINISH].click()
    run_until(loop, lambda: window.banner.stop_now.isVisible())
    window.banner.stop_now.click()
    assert loop.run_until_complete(task) is True
    assert msg.finish_reason == SWITCHED and msg.content
    assert bridge.source == "next-model"


def test_cancel_switch_from_the_banner_keeps_the_model(window, loop, make_engine):
    bridge = window.ctx.bridge
    loader = Loader(make_engine)
    bridge.loader = loader
    old = bridge.local.engine
    tab = window.current_tab()
    msg = streaming_reply(tab, loop)
    task, box = ask(window, loop, "next-model")
    box.buttons[Choice.FINISH].click()
    run_until(loop, lambda: window.banner.cancel_switch.isVisible())
    window.banner.cancel_switch.click()
    assert loop.run_until_complete(task) is False
    assert not loader.calls and bridge.local.engine is old and bridge.source == "tiny"
    assert not window.banner.isVisibleTo(window)
    assert tab.send_text("x") is False  # still busy with its reply: it was never cut
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert msg.finish_reason == "length"


@pytest.mark.parametrize("size", [(1200, 780), (900, 600)])
def test_the_question_fits_the_window(window, loop, make_engine, size):
    window.resize(*size)
    window.ctx.bridge.loader = Loader(make_engine)
    tab = window.current_tab()
    streaming_reply(tab, loop)
    task, box = ask(window, loop, "next-model")
    QApplication.processEvents()
    assert box.width() <= size[0] and box.height() <= size[1]
    for button in box.buttons.values():
        assert button.width() >= button.sizeHint().width()  # whole labels
    box.buttons[None].click()
    assert loop.run_until_complete(task) is False


def _saved(db: Any) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    """Every stored message (all chats) and every stats snapshot, as another process reads
    them."""
    s = stored(db)
    try:
        msgs = [(m.session_id, m.id, m.role, m.content, m.is_complete)
                for sess in s.list_sessions() for m in s.list_messages(sess.id)]
        return msgs, [snap.data for snap in s.list_stats_snapshots()]
    finally:
        s.close()


def test_chats_drafts_and_history_survive_a_switch_and_the_panel_names_the_model(
        history_app, loop, make_engine):
    window = history_app.start()
    bridge = window.ctx.bridge

    def next_model(source: str) -> Any:
        engine = make_engine(context_length=8192)
        engine.description = "next tiny model"
        return engine

    bridge.loader = next_model
    tab = window.current_tab()
    assert tab.send_text("remember me")
    run_until(loop, lambda: not tab.conversation.is_busy)
    drafted = window.new_tab()
    drafted.input.setPlainText("an unsent draft")
    dock = window.stats_dock
    dock.show()
    dock.refresh(poll=True)  # the first poll saves a snapshot of the first model
    assert dock.panel.model_line.text().startswith("Model: tiny test model, loaded ")
    run_until(loop, lambda: len(_saved(history_app.db)[0]) == 2
              and len(_saved(history_app.db)[1]) == 1)
    rows, snapshots = _saved(history_app.db)
    shown = [(m.role, m.content, m.finish_reason) for m in tab.conversation.messages]

    assert loop.run_until_complete(window.load_model("next-model")) is True
    assert bridge.description == "next tiny model"
    # the chats and the draft are as they were
    assert window.chat_tabs() == [tab, drafted]
    assert [(m.role, m.content, m.finish_reason) for m in tab.conversation.messages] == shown
    assert drafted.input.toPlainText() == "an unsent draft"
    window.draft_saver.changed()
    run_until(loop, lambda: "an unsent draft" in str(
        Settings.load(window.ctx.settings.path).drafts), timeout=5)
    # the panel says a new model was loaded, its charts keep the minutes before with a mark
    dock.refresh(poll=True)
    assert re.fullmatch(r"Model: next tiny model, loaded \d\d:\d\d — figures since then",
                        dock.panel.model_line.text())
    assert len(dock.model.samples) >= 2  # not zeroed
    mark = dock.panel.charts.switch_lines["tokens_per_s"][0]
    assert mark.isVisible() and -5.0 < mark.value() <= 0.0
    assert "next tiny model" in mark.label.format
    # the history store keeps every row from before the switch
    after_rows, after_snapshots = _saved(history_app.db)
    assert after_rows == rows
    assert after_snapshots[:len(snapshots)] == snapshots
    assert snapshots[0]["model"] == "tiny test model"
    # and the chat goes on with the new model
    assert tab.send_text("still here?")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.conversation.messages[-1].answered_by == "next tiny model"


def test_api_requests_count_as_running_and_new_ones_wait_for_the_new_model(
        window, loop, make_engine):
    from openai import APIStatusError

    from .test_api_server import free_port

    bridge = window.ctx.bridge
    loader = Loader(make_engine)
    bridge.loader = loader
    window.ctx.settings.server_port = port = free_port()
    controls = window.api_server
    controls.action.trigger()
    run_until(loop, lambda: controls.server.running)
    client = openai_client(f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    model = loop.run_until_complete(client.models.list()).data[0].id
    parts: list[str] = []
    finish: list[str] = []

    async def stream() -> None:
        chunks = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "a long one"}],
            max_tokens=REPLY_TOKENS, temperature=0, stream=True)
        async for chunk in chunks:
            choice = chunk.choices[0]
            parts.append(choice.delta.content or "")
            if choice.finish_reason:
                finish.append(choice.finish_reason)

    api = loop.create_task(stream())
    run_until(loop, lambda: len(parts) > 3)
    tab = window.current_tab()
    streaming_reply(tab, loop)
    task, box = ask(window, loop, "next-model")
    assert box.informativeText().startswith(
        f"2 replies are running: 1 in “{tab.conversation.title}” and 1 from the API server.")
    box.buttons[Choice.FINISH].click()
    run_until(loop, lambda: bool(bridge.refusing))
    with pytest.raises(APIStatusError) as refused:  # a new API request waits too
        loop.run_until_complete(client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4))
    assert refused.value.status_code == 503 and "switching models" in str(refused.value)
    assert loop.run_until_complete(task) is True
    loop.run_until_complete(api)
    assert finish == ["length"]  # the API reply ran to its end
    assert bridge.source == "next-model"
    reply = loop.run_until_complete(client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4))
    assert reply.usage.completion_tokens == 4
    loop.run_until_complete(client.close())


def test_closing_the_window_while_a_switch_waits_quits_without_loading(window, loop,
                                                                       make_engine):
    loader = Loader(make_engine)
    window.ctx.bridge.loader = loader
    tab = window.current_tab()
    msg = streaming_reply(tab, loop, tokens=LONG_REPLY)
    task, box = ask(window, loop, "next-model")
    box.buttons[Choice.FINISH].click()
    run_until(loop, lambda: bool(window.ctx.bridge.refusing))
    window.close()
    run_until(loop, lambda: window._closed, timeout=10)
    assert loop.run_until_complete(task) is False
    assert not loader.calls
    assert msg.finish_reason == "shutdown"  # quitting ends it, as it always did


def test_closing_the_window_while_it_asks_answers_cancel(window, loop, make_engine):
    loader = Loader(make_engine)
    window.ctx.bridge.loader = loader
    streaming_reply(window.current_tab(), loop, tokens=LONG_REPLY)
    task, box = ask(window, loop, "next-model")
    window.close()
    run_until(loop, lambda: window._closed, timeout=10)
    assert loop.run_until_complete(task) is False
    assert not loader.calls


def test_compare_columns_count_as_replies_of_their_tab_and_stop_keeps_both(
        window, loop, make_engine):
    from app.conversation import ReplyTarget

    from .conftest import FAST

    window.ctx.bridge.loader = Loader(make_engine)
    tab = window.current_tab()
    conv = tab.conversation
    params = dict(FAST, max_tokens=LONG_REPLY)
    replies = conv.compare("Compare these", [ReplyTarget(None, params, "a"),
                                             ReplyTarget(None, dict(params, seed=3), "b")])
    assert len(replies) == 2
    run_until(loop, lambda: all(len(m.content) > 3 for m in replies))
    task, box = ask(window, loop, "next-model")
    assert box.informativeText().startswith(
        f"2 replies are running: 2 in “{conv.title}”.")
    box.buttons[Choice.STOP].click()
    assert loop.run_until_complete(task) is True
    assert [m.finish_reason for m in replies] == [SWITCHED, SWITCHED]
    assert all(m.content and not m.streaming for m in replies)
    assert window.ctx.bridge.source == "next-model"


def test_a_simulator_run_counts_as_running_and_finishes_whole_before_the_switch(
        window, loop, make_engine, qtbot):
    from .test_simulator_panel import click, configure, open_panel

    loader = Loader(make_engine)
    window.ctx.bridge.loader = loader
    panel = open_panel(window, qtbot)
    configure(panel, requests=4, burst=4, tokens=(300, 300))
    click(qtbot, panel.start_button)
    run_until(loop, lambda: window.ctx.bridge.running().simulator == 4)
    task, box = ask(window, loop, "next-model")
    assert box.informativeText().startswith(
        "4 replies are running: 4 from the load simulator.")
    box.buttons[Choice.FINISH].click()
    assert loop.run_until_complete(task) is True
    assert not panel.is_running and panel.run.summary is not None
    results = panel.run.results
    assert [r.finish_reason for r in results] == ["length"] * 4  # none cut
    assert loader.calls == [("next-model", False)]


def test_the_window_takes_the_keys_again_after_the_question(window, loop, make_engine):
    from PySide6.QtCore import Qt

    from .test_window_edges import CTRL, _activate, _key, _settle

    window.ctx.bridge.loader = Loader(make_engine)
    tab = window.current_tab()
    streaming_reply(tab, loop, tokens=LONG_REPLY)
    _activate(window, loop)
    task, box = ask(window, loop, "next-model")
    run_until(loop, lambda: QApplication.activeWindow() is box, timeout=2)
    box.buttons[None].click()
    assert loop.run_until_complete(task) is False
    _settle(loop)
    assert QApplication.activeWindow() is window
    assert window.focusWidget() is tab.input
    count = window.tabs.count()
    _key(Qt.Key.Key_T, CTRL)  # Ctrl+T: a new tab, at once
    assert window.tabs.count() == count + 1


def test_a_reply_stopped_by_a_switch_is_saved_so_and_reads_so_after_a_restart(
        history_app, loop, make_engine):
    window = history_app.start()
    window.ctx.bridge.loader = Loader(make_engine)
    tab = window.current_tab()
    msg = streaming_reply(tab, loop, tokens=LONG_REPLY)
    task, box = ask(window, loop, "next-model")
    box.buttons[Choice.STOP].click()
    assert loop.run_until_complete(task) is True
    session_id, text = tab.conversation.session_id, msg.content

    def saved() -> Any:
        s = stored(history_app.db)
        try:
            return next((m for m in s.list_messages(session_id) if m.id == msg.id), None)
        finally:
            s.close()

    run_until(loop, lambda: saved() is not None and saved().is_complete
              and (saved().stats or {}).get("finish_reason") == SWITCHED)
    assert saved().content == text
    history_app.stop()
    again = history_app.start()
    back = again.current_tab()
    assert back.conversation.session_id == session_id
    reply = back.conversation.messages[-1]
    assert (reply.content, reply.finish_reason) == (text, SWITCHED)
    assert FINISH_NOTES[SWITCHED] in back.messages.widgets[-1].stats.text()


def test_esc_cancels_and_enter_lets_them_finish(window, loop, make_engine, qtbot):
    from PySide6.QtCore import Qt

    bridge = window.ctx.bridge
    bridge.loader = Loader(make_engine)
    tab = window.current_tab()
    msg = streaming_reply(tab, loop)
    task, box = ask(window, loop, "next-model")
    qtbot.keyClick(box, Qt.Key.Key_Escape)
    assert loop.run_until_complete(task) is False and bridge.source == "tiny"
    task, box = ask(window, loop, "next-model")
    qtbot.keyClick(box, Qt.Key.Key_Return)  # the default: the safe choice
    assert loop.run_until_complete(task) is True
    assert msg.finish_reason == "length" and bridge.source == "next-model"
