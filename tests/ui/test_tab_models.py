"""Issue #50, the window's side: each tab on its own model. The default model (the bundled
one, the ModelHost's) and its Q8_0 copy made by gguf-py (the ModelManager's, loaded when a
tab first sends to it), both real engines: two tabs stream at once, each reply the answer
its model gives alone (greedy); a tab switching model (its model loading) leaves another
tab's running reply untouched, and the default model's switch question counts only the
default model's replies. The tab's model is saved with its replies, as its backend is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.history.convert import last_model, stats_dict
from tests.fleet_models import bundled_path
from ui.chat.message_view import stats_text

from .conftest import run_until
from .two_models import (
    LONG,
    OTHER,
    PROMPT,
    alone_reply,
    keep_alone,
    model_file,
    on_model,
    other_model_dir,
    reply_of,
    two_model_bridge,
)


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: Any) -> Path:
    return other_model_dir(tmp_path_factory)


@pytest.fixture
def bridge(loop: Any, models_dir: Path) -> Any:
    yield from two_model_bridge(loop, models_dir)


def test_two_tabs_on_two_models_stream_at_once(make_window, bridge, loop, models_dir):
    window = make_window(bridge)
    first = window.current_tab()
    assert first.conversation.model is None  # a new tab starts on the default model
    assert first.backend_picker.currentIndex() == 0
    assert first.backend_picker.itemText(0) == "Local engine: the bundled model"
    # each model alone (the other one loads at its tab's first send)
    alone_tab = {None: on_model(window, None), OTHER: on_model(window, OTHER)}
    alone = {}
    for model, tab in alone_tab.items():  # sent here: the other model loads at its send
        assert tab.send_text(PROMPT)
        alone[model] = reply_of(tab, loop)
        keep_alone(tab, model, model_file(models_dir, model), alone[model].content)
    assert alone[OTHER].model == OTHER and alone[None].model is None
    # the reply's line of figures names the model when it is not the default one
    assert f" · {OTHER}" in stats_text(alone[OTHER])
    assert OTHER not in stats_text(alone[None])
    assert alone[None].content != alone[OTHER].content, "the two models answer differently"
    assert [m.name for m in bridge.fleet.running()] == [OTHER]
    # the status bar lists the other model loaded, with its estimate
    status = window.engine_status
    status.show_others()
    assert status.others_label.isVisible()
    assert re.fullmatch(rf"Also: {OTHER} \(\d+ MiB\)", status.others_label.full_text())

    # both at once, on their two engines
    tabs = {None: on_model(window, None), OTHER: on_model(window, OTHER)}
    for tab in tabs.values():
        assert tab.send_text(PROMPT)
    replies = {m: t.conversation.messages[-1] for m, t in tabs.items()}
    run_until(loop, lambda: all(r.content and r.streaming for r in replies.values())
              or not all(r.streaming for r in replies.values()), timeout=60)
    assert all(r.streaming for r in replies.values()), "both streamed at the same time"
    for model, tab in tabs.items():
        assert reply_of(tab, loop).content == alone[model].content
    # the default model's switch question counts only its own replies: none now
    loop.run_until_complete(bridge.fleet.unload(OTHER))
    status.show_others()
    assert not status.others_label.isVisible()  # none loaded beside the default one
    assert bridge.running().total == 0

    # saved with the reply's stats, as the backend is; a restored chat goes on there
    assert stats_dict(replies[OTHER])["model"] == OTHER
    assert "model" not in stats_dict(replies[None])
    assert last_model(tabs[OTHER].conversation.messages) == OTHER


def test_a_tab_switching_model_leaves_another_tabs_stream_untouched(make_window, bridge,
                                                                     loop):
    window = make_window(bridge)
    alone = alone_reply(window, loop, None, bundled_path(), LONG)

    streaming = on_model(window, None, LONG)
    assert streaming.send_text(PROMPT)
    running = streaming.conversation.messages[-1]
    run_until(loop, lambda: len(running.content) > 3)
    assert running.streaming

    # another tab switches to the other model while that reply streams: the model loads
    # (a thread of its own), the tab waits for it, then streams on it
    seen_at_load = []  # was that reply still streaming when the other model had loaded?
    bridge.fleet.changed.connect(
        lambda name, state: seen_at_load.append(running.streaming) if state == "loaded"
        else None)
    switcher = on_model(window, None)
    notices: list[str] = []
    switcher.conversation.notice.connect(notices.append)
    also: list[str] = []  # the status bar's other models while it loads
    bridge.fleet.load_progress.connect(
        lambda *_: also.append(window.engine_status.show_others()
                               or window.engine_status.others_label.full_text()))
    switcher.set_model(OTHER)
    assert switcher.backend_picker.currentData() == "model:" + OTHER
    assert switcher.send_text(PROMPT)
    assert switcher.conversation.is_busy
    assert bridge.running().chats == {streaming.conversation.tag: 1}  # not the loading tab's
    other = reply_of(switcher, loop)
    assert other.model == OTHER and other.content
    assert seen_at_load == [True]
    # the tab said how far its model had loaded, as did the status bar
    assert notices[0] == f"Loading {OTHER} …" and notices[-1] == ""
    shares = [int(m.group(1)) for n in notices
              if (m := re.fullmatch(rf"Loading {OTHER} … (\d+) %", n))]
    assert len(shares) >= 2 and shares == sorted(shares) and shares[-1] == 100
    assert any(re.fullmatch(rf"Also: {OTHER} \(loading \d+ %, \d+ MiB\)", a) for a in also)

    done = reply_of(streaming, loop)
    assert done is running and done.content == alone and done.finish_reason == "length"
    # the model the tab left is loaded still (idle), and the default one kept serving
    assert bridge.source == "bundled" and [m.name for m in bridge.fleet.running()] == [OTHER]


def test_the_tabs_model_comes_back_after_a_restart(history_app, loop):
    """Saved as the tab's backend is: with its replies; the restored tab goes on there. (The
    app's own ModelManager over the library, loading with the window's loader: here the
    tiny model for any source.)"""
    window = history_app.start()
    model = window.ctx.bridge.other_models()[0]  # the library's first model but the default
    tab = on_model(window, model, 12)
    assert tab.send_text("Remember which model answered")
    assert tab.conversation.is_busy  # waiting for its model to load
    reply = reply_of(tab, loop)
    assert reply.model == model and reply.content
    session_id = tab.conversation.session_id
    history_app.stop()

    window = history_app.start()  # a restart on the same database and settings
    tab = next(t for t in (window.tabs.tab_for(c) for c in window.workspace.conversations)
               if t.conversation.session_id == session_id)
    assert tab.conversation.messages[-1].model == model
    assert tab.conversation.model == model and tab.conversation.backend is None
    assert tab.backend_picker.currentData() == "model:" + model


def test_a_compare_across_two_models(make_window, bridge, loop, models_dir):
    """Compare offers the library's other model; it loads first, then both targets answer at
    once, each as its model alone (the prefill is shared only on the same engine)."""
    from ui.compare.dialog import CompareDialog
    from ui.compare.targets import TAB_SETTINGS

    window = make_window(bridge)
    alone = {model: alone_reply(window, loop, model, model_file(models_dir, model))
             for model in (None, OTHER)}
    loop.run_until_complete(bridge.fleet.unload(OTHER))  # the compare loads it (again)

    tab = on_model(window, None)
    tab.input.setPlainText(PROMPT)
    window.actions_by_name["compare"].trigger()  # Chat → Compare…
    dialog = tab.findChild(CompareDialog)
    rows = dialog.target_list
    while len(rows.rows) < 2:
        rows.add_row()
    for row, label in zip(rows.rows, (TAB_SETTINGS, f"{OTHER} · this tab's settings"),
                          strict=True):
        index = row.combo.findText(label)
        assert index >= 0, f"{label!r} is offered"
        row.combo.setCurrentIndex(index)
        row.combo.activated.emit(index)
    assert [t.model for t in rows.targets()] == [None, OTHER]
    assert dialog.send()
    assert dialog.error.text() == f"Loading {OTHER} …"
    run_until(loop, lambda: len(dialog.columns) == 2, timeout=60)
    run_until(loop, lambda: not tab.conversation.is_busy, timeout=120)
    answers = [c.message for c in dialog.columns]
    assert [m.model for m in answers] == [None, OTHER]
    assert [m.content for m in answers] == [alone[None], alone[OTHER]]
    dialog.close()
