"""Issue #50 follow-ups 2 and 3: the status bar's live figures and the input box's token count
follow the front chat's model (its own engine, tokenizer and context), and the status bar
fits at 900 px with a model beside the default one (the description goes first, then the
figures' less telling parts; every shortened text whole in its tooltip). Real engines: the
bundled model (default), its Q8_0 copy and a tiny random llama with another tokenizer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from app.bridge.prompt_size import count_prompt
from tests.fleet_models import tiny_gguf

from .conftest import run_until
from .two_models import OTHER, on_model, other_model_dir, reply_of, two_model_bridge

TINY = "tiny-a"


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: Any) -> Path:
    d = other_model_dir(tmp_path_factory)
    tiny_gguf(d / f"{TINY}.gguf", seed=0)
    return d


@pytest.fixture
def bridge(loop: Any, models_dir: Path) -> Any:
    yield from two_model_bridge(loop, models_dir)


def in_front(window: Any, tab: Any) -> None:
    window.tabs.setCurrentWidget(tab)
    assert window.workspace.front is tab.conversation


def figures(window: Any) -> str:
    status = window.engine_status
    status.show_stats()
    return status.stats_label.text()


def test_the_figures_are_the_front_chats_models(make_window, bridge, loop):
    window = make_window(bridge)
    window.resize(1400, 780)
    on_default = window.current_tab()
    on_other = on_model(window, OTHER, 20)
    assert on_other.send_text("Name a colour.")
    reply_of(on_other, loop)
    assert bridge.stats(OTHER).completed == 1 and bridge.stats().completed == 0
    text = figures(window)
    assert text.startswith(f"{OTHER}: 0 generating") and text.endswith("· 1 done")
    assert OTHER in window.engine_status.stats_label.toolTip()
    in_front(window, on_default)
    text = figures(window)
    assert text.startswith("0 generating") and text.endswith("· 0 done")
    assert "the default model" in window.engine_status.stats_label.toolTip()
    # a chat on a model not loaded yet says so, without figures
    on_tiny = on_model(window, TINY)
    assert window.workspace.front is on_tiny.conversation
    assert figures(window) == f"{TINY}: not loaded"


def test_the_token_count_uses_the_tabs_models_tokenizer_and_context(make_window, bridge,
                                                                      loop):
    window = make_window(bridge)
    on_default = window.current_tab()
    on_tiny = on_model(window, TINY)
    for tab in (on_default, on_tiny):
        tab.input.setPlainText("How far can a lighthouse be seen at night?")
    count = on_tiny.token_count
    run_until(loop, lambda: count.current)
    assert count.size is None and count.isHidden(), "not loaded: nothing to count with"
    run_until(loop, lambda: on_default.token_count.current
              and on_default.token_count.size is not None)
    loop.run_until_complete(bridge.load_model(TINY))
    run_until(loop, lambda: count.current and count.size is not None)  # counted again
    tiny, default = bridge.local_of(TINY), bridge.local
    assert tiny is not None and tiny is not default
    prompt = on_tiny.conversation.next_prompt(on_tiny.input.toPlainText(), None, [], [])
    expected = loop.run_until_complete(count_prompt(tiny, prompt))
    assert (count.size.tokens, count.size.context) == (expected.tokens, expected.context)
    assert expected.context == tiny.context_length != default.context_length
    assert count.text() == f"{expected.tokens} / {tiny.context_length} tokens"
    on_default.token_count.schedule()
    run_until(loop, lambda: on_default.token_count.current)
    own = loop.run_until_complete(count_prompt(default, prompt))
    assert on_default.token_count.size.context == default.context_length
    assert on_default.token_count.size.tokens == own.tokens != expected.tokens


def laid_out(window: Any, loop: Any, width: int, height: int) -> list[Any]:
    """The status bar's items shown, left to right, once the window is `width` wide."""
    window.resize(width, height)
    run_until(loop, lambda: window.width() == width)
    window.engine_status.show_stats()
    loop.run_until_complete(asyncio.sleep(0.2))  # the bar lays its items out again
    bar = window.statusBar()
    items = [w for w in bar.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
             if w.isVisible() and w.width() > 0 and not w.isWindow()]
    return sorted(items, key=lambda w: w.x())


def test_the_status_bar_fits_at_900_px_with_two_models(make_window, bridge, loop):
    window = make_window(bridge)
    status = window.engine_status
    on_other = on_model(window, OTHER, 12)
    assert on_other.send_text("Name a colour.")
    reply_of(on_other, loop)
    assert not status.others_label.isHidden(), "'Also: …' lists the model beside the default"

    items = laid_out(window, loop, 900, 600)
    bar = window.statusBar()
    for left, right in zip(items, items[1:], strict=False):  # nothing overlaps, all inside
        assert left.geometry().right() < right.geometry().left(), (left, right)
    assert items[-1].geometry().right() <= bar.width()
    assert status.model_label.isHidden() and status.fit.dropped, "the description went first"
    text = status.stats_label.text()
    metrics = status.stats_label.fontMetrics()
    assert metrics.horizontalAdvance(text) <= status.stats_label.contentsRect().width()
    assert "queued" in text and "tok/s" in text  # the telling figures stay
    whole = status.stats_label.toolTip().splitlines()[0]
    assert whole.startswith(f"{OTHER}: ") and whole.endswith("· 1 done")
    others = status.others_label
    if others.text() != others.full_text():  # shortened: whole in its tooltip
        assert "…" in others.text() and others.toolTip() == others.full_text()
    assert others.width() >= 100, "the other models' list keeps room for a name"

    items = laid_out(window, loop, 1400, 780)
    assert not status.model_label.isHidden() and not status.fit.dropped
    text = status.stats_label.text()  # all of it at 1400 px (the rate moves on)
    assert text.startswith(f"{OTHER}: 0 generating") and text.endswith("batch 0 · 1 done")
    assert "\n" not in status.stats_label.toolTip(), "nothing shortened"
    described = status.model_label  # a long description: shortened, whole in its tooltip
    assert described.width() >= 150
    assert described.text() == described.full_text() or described.toolTip() == \
        described.full_text()
