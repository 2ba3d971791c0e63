"""Issue #50, unloading from the window: the status bar's Unload menu lists the models loaded
beside the default one; with a reply running on the model it asks first (let it finish, stop
it, or cancel), as the API's unload does, and a reply on the default model streams on
untouched. Real engines: the bundled model and its Q8_0 copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.bridge.switch import Choice
from tests.fleet_models import bundled_path

from .conftest import run_until
from .two_models import (
    LONG,
    OTHER,
    PROMPT,
    alone_reply,
    on_model,
    other_model_dir,
    reply_of,
    two_model_bridge,
)

MIDDLE = 120  # a reply on the other model still running when its unload is asked for


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: Any) -> Path:
    return other_model_dir(tmp_path_factory)


@pytest.fixture
def bridge(loop: Any, models_dir: Path) -> Any:
    yield from two_model_bridge(loop, models_dir)


def menu_items(status: Any) -> list[tuple[str, bool]]:
    status.show_others()
    status.unload_menu.aboutToShow.emit()  # as opening it does
    return [(a.text(), a.isEnabled()) for a in status.unload_menu.actions()]


def ask_unload(status: Any, loop: Any) -> Any:
    """Trigger the menu's item for the other model; the question it opens (None: none)."""
    action = next(a for a in status.unload_menu.actions() if a.data() == OTHER)
    action.trigger()
    task = next(iter(status.unloader._tasks))
    run_until(loop, lambda: status.unloader.question is not None or task.done())
    return status.unloader.question, task


def streaming(tab: Any, loop: Any) -> Any:
    """A reply of `tab` streaming (its model loaded first if it is not)."""
    assert tab.send_text(PROMPT), tab.notice.text()

    def last() -> Any:
        return tab.conversation.messages[-1]

    run_until(loop, lambda: last().role == "assistant" and len(last().content) > 3, timeout=120)
    assert last().streaming
    return last()


def test_unload_asks_while_replies_run_and_leaves_the_default_models_reply(
        make_window, bridge, loop):
    window = make_window(bridge)
    status = window.engine_status
    status.show_others()
    assert not status.unload_button.isVisible(), "nothing loaded beside the default model"

    alone_default = alone_reply(window, loop, None, bundled_path(), LONG)
    other_alone = on_model(window, OTHER, MIDDLE)
    assert other_alone.send_text(PROMPT)
    alone_other = reply_of(other_alone, loop).content
    assert menu_items(status) == [(f"Unload {OTHER}", True)]
    assert status.unload_button.isVisible()

    # idle: unloaded at once, no question
    question, task = ask_unload(status, loop)
    assert question is None
    run_until(loop, task.done)
    assert task.result() is True and bridge.fleet.running() == []
    status.show_others()
    assert not status.unload_button.isVisible()

    # a reply on each model; cancel the question: nothing changes
    on_default = on_model(window, None, LONG)
    default_reply = streaming(on_default, loop)
    on_other = on_model(window, OTHER, MIDDLE)
    other_reply = streaming(on_other, loop)
    assert menu_items(status) == [(f"Unload {OTHER} (1 running)", True)]
    question, task = ask_unload(status, loop)
    assert question.text() == f"Unload {OTHER}?"
    assert f"1 reply is running: 1 in “{on_other.conversation.title}”." in \
        question.informativeText()
    question.buttons[None].click()
    run_until(loop, task.done)
    assert task.result() is False and [m.name for m in bridge.fleet.running()] == [OTHER]

    # let it finish: the reply ends as that model alone gives it, then the model unloads
    question, task = ask_unload(status, loop)
    question.buttons[Choice.FINISH].click()
    run_until(loop, task.done, timeout=120)
    assert task.result() is True and bridge.fleet.running() == []
    assert other_reply.finish_reason == "length" and other_reply.content == alone_other

    # stop it: it ends now, its text kept
    other_reply = streaming(on_model(window, OTHER, LONG), loop)
    question, task = ask_unload(status, loop)
    question.buttons[Choice.STOP].click()
    run_until(loop, task.done, timeout=60)
    assert task.result() is True and bridge.fleet.running() == []
    assert other_reply.finish_reason == "cancelled" and other_reply.content

    # the default model's reply streamed on through all of it
    done = reply_of(on_default, loop)
    assert done is default_reply and done.content == alone_default
