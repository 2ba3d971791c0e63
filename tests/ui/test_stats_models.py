"""Issue #50, the stats panel with two models: each loaded model has its own engine and its
own figures; the panel says whose they are and a chooser (shown while models are loaded
beside the default one) switches between them. Real engines: the bundled model and its Q8_0
copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ui.stats.panel import DEFAULT_CHOICE

from .conftest import run_until
from .two_models import OTHER, PROMPT, on_model, other_model_dir, reply_of, two_model_bridge


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: Any) -> Path:
    return other_model_dir(tmp_path_factory)


@pytest.fixture
def bridge(loop: Any, models_dir: Path) -> Any:
    yield from two_model_bridge(loop, models_dir)


def choose(dock: Any, model: str | None) -> None:
    combo = dock.panel.model_choice
    index = combo.findData(model) if model is not None else 0
    assert index >= 0, f"{model!r} is offered"
    combo.setCurrentIndex(index)
    combo.activated.emit(index)


def test_the_panel_shows_each_models_own_figures(make_window, bridge, loop):
    window = make_window(bridge)
    dock = window.stats_dock
    dock.toggleViewAction().trigger()
    dock.refresh(poll=True)
    combo = dock.panel.model_choice
    assert not combo.isVisible(), "only the default model: no chooser"

    on_default = on_model(window, None, 20)
    assert on_default.send_text(PROMPT)
    reply_of(on_default, loop)
    on_other = on_model(window, OTHER, 30)
    assert on_other.send_text(PROMPT)
    other = reply_of(on_other, loop)
    assert other.model == OTHER

    dock.refresh(poll=True)
    assert combo.isVisible()
    assert [combo.itemText(i) for i in range(combo.count())] == [DEFAULT_CHOICE,
                                                                 f"Model: {OTHER}"]
    values = dock.panel.values
    default_engine = bridge.local
    assert values["generated"].text() == str(default_engine.stats().total_generated_tokens)
    assert dock.panel.model_line.text().startswith("Model: ")

    choose(dock, OTHER)
    other_engine = bridge.fleet.targets()[OTHER]
    assert dock.model.engine is other_engine
    assert values["generated"].text() == "30" == str(
        other_engine.stats().total_generated_tokens)
    assert dock.model.model.name == other_engine.description
    rows = dock.model.rows
    assert [(r.source, r.generated_tokens) for r in rows] == [(on_other.conversation.title, 30)]

    choose(dock, None)
    assert dock.model.engine is default_engine
    assert values["generated"].text() == str(default_engine.stats().total_generated_tokens)
    assert all(r.generated_tokens != 30 or r.source != on_other.conversation.title
               for r in dock.model.rows)

    # the model unloaded while chosen: the panel goes back to the default model's figures
    choose(dock, OTHER)
    loop.run_until_complete(bridge.fleet.unload(OTHER))
    dock.refresh(poll=True)
    run_until(loop, lambda: dock.model.engine is default_engine)
    assert not combo.isVisible() and dock.model.chosen is None
