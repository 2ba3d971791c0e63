"""Issue #53 (4) in the tabs: a tab whose context overflow policy is truncate_middle or
rolling_window goes on past the model's 512-token context for 30 turns, each prompt leaving
the reply its room, and its stats line says what was dropped; a tab left at stop refuses
as before. Preferences holds the default a new tab starts with."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.bridge import EngineBridge
from app.settings import Settings
from tests.ui.conftest import run_until
from tests.ui.test_preferences import open_with_shortcut

CONTEXT = 512
MAX_TOKENS = 12  # the tests' FAST preset


@pytest.fixture
def small_bridge(loop, make_engine) -> Iterator[EngineBridge]:
    bridge = EngineBridge(loader=lambda source: make_engine(context_length=CONTEXT))
    loop.run_until_complete(bridge.use_engine(make_engine(context_length=CONTEXT), "tiny"))
    yield bridge
    loop.run_until_complete(bridge.shutdown(timeout=2.0))


@pytest.fixture
def small_window(small_bridge, make_window, qtbot) -> Any:
    """A window on a 512-token model (closed before its bridge shuts down)."""
    w = make_window(small_bridge)
    qtbot.waitExposed(w)
    return w


def turn(i: int) -> str:
    return f"Turn {i}: one more thing about rivers, please, in a few words."


@pytest.mark.parametrize("policy", ["truncate_middle", "rolling_window"])
def test_a_dropping_tab_goes_on_past_the_context(small_window, loop, policy) -> None:
    tab = small_window.current_tab()
    box = tab.panel.overflow
    box.setCurrentIndex(box.findData(policy))
    conv = tab.conversation
    assert conv.params["context_overflow"] == policy
    for i in range(30):
        assert tab.send_text(turn(i)), tab.notice.text()
        run_until(loop, lambda: not conv.is_busy, timeout=30)
    replies = [m for m in conv.messages if m.role == "assistant"]
    assert len(replies) == 30
    assert all(m.finish_reason == "length" for m in replies)  # none stopped at the context
    # every prompt left the reply its room
    assert all(m.stats.prompt_tokens + MAX_TOKENS <= CONTEXT for m in replies)
    last = replies[-1]
    assert last.stats.dropped_tokens > 0 and last.stats.dropped_messages >= 2
    shown = tab.messages.widgets[-1].stats.text()
    assert f"{last.stats.dropped_tokens} tokens dropped " \
           f"({last.stats.dropped_messages} messages)" in shown
    assert "dropped" not in tab.messages.widgets[1].stats.text()  # the first one fit
    # the chat itself keeps every message; only the prompts left some out
    assert len(conv.messages) == 60


def test_stop_refuses_once_the_chat_outgrows_the_context(small_window, loop) -> None:
    tab = small_window.current_tab()
    conv = tab.conversation
    assert tab.panel.overflow.value() is None  # stop, the default
    for i in range(30):
        run_until(loop, lambda: tab.token_count.current, timeout=10)
        if not tab.send_text(turn(i)):
            break
        run_until(loop, lambda: not conv.is_busy, timeout=30)
        if conv.messages[-1].finish_reason == "context" or tab.notice.isVisible():
            break
    assert len([m for m in conv.messages if m.role == "assistant"]) < 30
    # Send refused it, saying so (the count was current: it says what would help)
    assert tab.notice.isVisible()
    assert "Context overflow" in tab.notice.text()


def test_preferences_hold_the_default_a_new_tab_starts_with(window, settings, loop,
                                                            qtbot) -> None:
    dialog = open_with_shortcut(window, loop, qtbot)
    assert dialog.overflow.value() is None
    dialog.overflow.setCurrentIndex(dialog.overflow.findData("rolling_window"))
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert Settings.load(settings.path).defaults.params["context_overflow"] == \
        "rolling_window"
    tab = window.new_tab()
    assert tab.conversation.params["context_overflow"] == "rolling_window"
    assert tab.panel.overflow.currentText() == "Rolling window"
    assert tab.panel.overrides() == {}
    box = tab.panel.overflow
    box.setCurrentIndex(box.findData("stop"))
    assert "context_overflow" not in tab.conversation.params
    assert tab.panel.overrides() == {"context_overflow": "Rolling window"}
