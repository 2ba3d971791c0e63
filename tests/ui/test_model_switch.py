"""Issue #32 item 2: switching the model never loses work. With replies running, the window
asks (let them finish / stop them / cancel); each answer is followed with a reply really
streaming, then its final state and text, then which model serves. Without running replies
it loads straight away; a failed load keeps the previous model serving."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication

from app.bridge import SWITCHED, BridgeState, Choice
from app.conversation import FINISH_NOTES
from ui.chat.message_view import stats_text
from ui.model_switch import SwitchQuestion

from .conftest import run_until

REPLY_TOKENS = 400  # long enough to be streaming when the question comes


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


def streaming_reply(tab: Any, loop: Any, text: str = "Tell a long story") -> Any:
    """Send `text` and wait until its reply has streamed a little; its message."""
    tab.panel.fields["max_tokens"].setValue(REPLY_TOKENS)
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
    msg = streaming_reply(tab, loop)
    gen = tab.conversation.generation
    loader.watch = msg
    task, box = ask(window, loop, "next-model")
    box.buttons[Choice.STOP].click()
    assert loop.run_until_complete(task) is True
    # stopped before the load, its text kept, and it says why (not "the engine shut down")
    assert loader.calls == [("next-model", False)]
    assert msg.finish_reason == SWITCHED and not msg.streaming
    assert msg.content and msg.content == gen.text
    assert 0 < msg.stats.generated_tokens < REPLY_TOKENS
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
    msg = streaming_reply(tab, loop)
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
