"""Errors show in the tab that caused them; loading fails gracefully; closing shuts down."""

from __future__ import annotations

import time

from app.bridge import BridgeState, EngineBridge
from tests.ui.conftest import run_until
from ui.models.library_dialog import ModelLibraryDialog


def test_queue_full_shows_in_the_tab_that_caused_it(make_window, make_engine, loop):
    bridge = EngineBridge()
    loop.run_until_complete(bridge.use_engine(make_engine(max_concurrent=1, max_queue=0)))
    window = make_window(bridge)
    first, second = window.current_tab(), window.new_tab()
    first.panel.fields["max_tokens"].setValue(5000)
    assert first.send_text("hold the only slot")
    run_until(loop, lambda: len(first.conversation.messages[1].content) > 0)
    assert not second.send_text("no room for me")
    assert second.notice.isVisibleTo(second) and "queue is full" in second.notice.text()
    assert not first.notice.isVisibleTo(first)
    assert [m.role for m in second.conversation.messages] == ["user"]
    first.stop()
    run_until(loop, lambda: not first.conversation.is_busy)
    assert second.regenerate()  # the kept message can be sent again
    assert not second.notice.isVisibleTo(second)
    run_until(loop, lambda: not second.conversation.is_busy)


def test_too_long_prompt_is_refused_and_context_overflow_is_reported(make_window,
                                                                      make_engine, loop):
    bridge = EngineBridge()
    loop.run_until_complete(bridge.use_engine(make_engine(context_length=64)))
    window = make_window(bridge)
    tab = window.current_tab()
    assert not tab.send_text("x" * 200)
    assert "Request refused" in tab.notice.text() and "context" in tab.notice.text()
    other = window.new_tab()
    other.panel.fields["max_tokens"].setValue(500)
    assert other.send_text("short")
    run_until(loop, lambda: not other.conversation.is_busy)
    reply = other.conversation.messages[1]
    assert reply.finish_reason == "context"
    assert "Context full" in other.notice.text()
    assert "context is full" in other.messages.widgets[1].stats.text()
    assert not tab.notice.text().startswith("Context full")


def test_engine_error_ends_the_reply_with_the_error(window, loop, monkeypatch):
    tab = window.current_tab()
    from engine import testing

    core = testing.internals(window.ctx.bridge.local.engine).core  # fault injection

    def broken_step(hand_over=None):
        raise RuntimeError("simulated kernel failure")

    monkeypatch.setattr(core, "step", broken_step)
    assert tab.send_text("hello")
    run_until(loop, lambda: not tab.conversation.is_busy)
    reply = tab.conversation.messages[1]
    assert reply.finish_reason == "error"
    assert "simulated kernel failure" in tab.notice.text()
    assert "simulated kernel failure" in tab.messages.widgets[1].stats.text()
    assert window.isVisible()  # nothing crashed


def test_sending_before_a_model_is_loaded_explains_why(make_window, loop):
    window = make_window(EngineBridge(loader=lambda source: time.sleep(0.3) or 1 / 0))
    task = window.load_model("bundled")
    run_until(loop, lambda: window.ctx.bridge.state == BridgeState.LOADING)
    assert window.banner.isVisibleTo(window) and window.banner.bar.isVisibleTo(window)
    tab = window.current_tab()
    assert not tab.send_text("hi")
    assert "still loading" in tab.notice.text()
    assert loop.run_until_complete(task) is False


def test_failed_load_shows_why_and_lets_the_user_pick_another(make_window, make_engine,
                                                              settings, loop, qtbot):
    def loader(source: str):
        if source != "good":
            raise FileNotFoundError(f"{source}: no such file or directory")
        return make_engine()

    bridge = EngineBridge(loader=loader)
    window = make_window(bridge)
    started = time.perf_counter()
    task = window.load_model("/nope/model.gguf")
    lags = []

    async def watch():  # the UI keeps running while the loader works
        last = time.perf_counter()
        while not task.done():
            await __import__("asyncio").sleep(0.01)
            now = time.perf_counter()
            lags.append(now - last)
            last = now

    loop.run_until_complete(watch())
    assert task.result() is False
    assert time.perf_counter() - started < 5
    assert bridge.state == BridgeState.FAILED
    assert window.banner.isVisibleTo(window) and window.banner.button.isVisibleTo(window)
    assert "no such file" in window.banner.label.text()
    tab = window.current_tab()
    assert not tab.send_text("hello")
    assert "No model is loaded" in tab.notice.text()

    window.banner.button.click()
    dialog = window.findChild(ModelLibraryDialog)
    assert dialog is not None and dialog.isVisible()
    dialog.source.setText("good")
    dialog.accept()
    run_until(loop, lambda: bridge.is_ready)
    assert not window.banner.isVisibleTo(window)
    assert settings.model == "good"
    assert tab.send_text("hello again")
    run_until(loop, lambda: not tab.conversation.is_busy)
    assert tab.conversation.messages[-1].content == tab.conversation.generations[-1].text


def test_closing_the_window_mid_generation_shuts_down_cleanly(window, loop):
    tabs = [window.current_tab()] + [window.new_tab() for _ in range(3)]
    for i, tab in enumerate(tabs):
        tab.panel.fields["max_tokens"].setValue(100_000)
        assert tab.send_text(f"go {i}")
    run_until(loop, lambda: all(t.conversation.messages[1].content for t in tabs))
    engine = window.ctx.bridge.local.engine
    finished = []
    window.shutdown_finished.connect(lambda: finished.append(True))
    window.close()
    assert window.isVisible()  # still up until the engine has stopped
    run_until(loop, lambda: bool(finished), timeout=10)
    assert window.shutdown_s is not None and window.shutdown_s < 3.0
    assert not window.isVisible()
    assert not engine.running
    assert window.ctx.bridge.state == BridgeState.STOPPED
    for tab in tabs:
        assert tab.conversation.generations[-1].finish_reason == "shutdown"
        assert not tab.conversation.is_busy
