"""Speculative decoding in the window (issue #31, item 5): a reply that drafted says how
its drafts went in its stats line; the stats panel shows the engine's mode, acceptance and
tokens per step; Chat → Speculative decoding is saved, survives a settings reload and is
the EngineConfig of the next load."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel

from app import speculative as spec
from app.bridge import EngineBridge
from app.context import AppContext
from app.settings import Settings
from tests.engine.conftest import drafting_pays
from tests.ui.conftest import run_until, spin

COPY = "copy: one two three one two three one two three one two three"


@pytest.fixture
def drafting_window(make_window, make_engine, loop):
    """The window on the tiny model with n-gram speculation (its greedy replies repeat)."""
    # (its drafting pays, whatever a drafted position costs on the tiny model)
    bridge = EngineBridge(loader=lambda source: drafting_pays(make_engine(speculative="ngram")))
    loop.run_until_complete(bridge.use_engine(drafting_pays(make_engine(speculative="ngram")),
                                              "tiny"))
    yield make_window(bridge)
    loop.run_until_complete(bridge.shutdown(timeout=2.0))


def test_a_drafted_reply_and_the_stats_panel_show_the_acceptance(drafting_window, loop):
    window = drafting_window
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(64)
    assert tab.conversation.send(COPY)
    run_until(loop, lambda: not tab.conversation.is_busy)
    spin(loop, 0.05)
    engine = tab.conversation.generations[-1].stream.stats
    assert engine.drafted_tokens > 0
    words = (f"drafts {100 * engine.acceptance:.0f}% accepted · "
             f"{engine.tokens_per_step:.1f} tokens per step")
    shown = [w.text() for w in tab.findChildren(QLabel, "statsLabel")]
    assert words in shown[-1], shown

    dock = window.stats_dock
    dock.show()
    dock.refresh(poll=True)
    s = window.ctx.bridge.local.engine.stats()
    values = {k: label.text() for k, label in dock.panel.values.items()}
    assert values["spec_mode"] == "N-gram (prompt lookup)"
    assert values["acceptance"] == f"{s.acceptance_rate:.0%}"
    assert values["tokens_per_step"] == f"{s.tokens_per_step:.2f}"
    assert values["drafted"] == f"{s.accepted_tokens} / {s.drafted_tokens}"
    assert s.drafted_tokens == engine.drafted_tokens

    # a second reply moves the panel's figures as the engine counts them (live)
    assert tab.conversation.send("and again: " + COPY)
    run_until(loop, lambda: not tab.conversation.is_busy)
    dock._tick()  # the panel's timer tick: poll, then repaint while shown
    after = window.ctx.bridge.local.engine.stats()
    assert after.drafted_tokens > s.drafted_tokens
    assert dock.panel.values["drafted"].text() == \
        f"{after.accepted_tokens} / {after.drafted_tokens}"


def test_a_reply_without_drafts_says_nothing_of_them(window, loop):
    tab = window.current_tab()
    assert tab.conversation.send(COPY)
    run_until(loop, lambda: not tab.conversation.is_busy)
    spin(loop, 0.05)
    shown = [w.text() for w in tab.findChildren(QLabel, "statsLabel")]
    assert "tokens" in shown[-1] and "drafts" not in shown[-1]
    window.stats_dock.show()
    window.stats_dock.refresh(poll=True)
    values = {k: label.text() for k, label in window.stats_dock.panel.values.items()}
    assert (values["spec_mode"], values["acceptance"]) == ("Off", "–")


def test_the_setting_is_saved_and_reaches_the_engine_at_the_next_load(make_window, make_engine,
                                                                      loop, settings):
    built = []

    def load(source: str):  # the window's loader: the setting, read at each load
        from app.backend.local_target import window_config
        from engine import EngineConfig

        config = window_config(EngineConfig(), lambda: settings.speculative)
        built.append(config)
        return make_engine(speculative=config.speculative)

    bridge = EngineBridge(loader=load)
    window = make_window(bridge)
    assert loop.run_until_complete(window.load_model("tiny"))
    assert built[-1].speculative == spec.DEFAULT == settings.speculative
    menu = window.speculative_menu
    assert menu.title() == "Speculati&ve decoding"
    menu.refresh()
    assert menu.actions_by_choice[spec.DEFAULT].isChecked()
    assert menu.note.text() == f"Now running: {spec.label(spec.DEFAULT)}"
    assert not menu.apply_now.isVisible()
    assert menu.actions_by_choice["draft"].isEnabled()

    other = spec.OFF if spec.DEFAULT != spec.OFF else spec.NGRAM
    menu.actions_by_choice[other].trigger()
    assert settings.speculative == other
    assert Settings.load(settings.path).speculative == other  # saved
    assert menu.note.text().endswith("applies at the next model load")
    assert window.ctx.bridge.stats().speculative == spec.DEFAULT  # not yet
    menu.apply_now.trigger()
    run_until(loop, lambda: (s := bridge.stats()) is not None and s.speculative == other)
    assert built[-1].speculative == other
    menu.refresh()
    assert menu.note.text() == f"Now running: {spec.label(other)}"
    loop.run_until_complete(bridge.shutdown(timeout=2.0))


def test_a_bad_saved_choice_keeps_the_default(settings):
    settings.set_speculative(spec.OFF)
    text = settings.path.read_text().replace('"speculative": "off"', '"speculative": "fast"')
    settings.path.write_text(text)
    assert Settings.load(settings.path).speculative == spec.DEFAULT
    with pytest.raises(ValueError, match="must be 'off', 'ngram'"):
        settings.set_speculative("fast")


@pytest.mark.bundled
def test_the_apps_own_loader_builds_the_engine_the_setting_names(loop, settings, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("BATCHCHAT_DATA_DIR", str(tmp_path / "data"))
    settings.set_speculative(spec.OFF)
    ctx = AppContext.create(settings)
    try:
        assert loop.run_until_complete(ctx.bridge.load("bundled"))
        assert ctx.bridge.local.engine.config.speculative == spec.OFF
        settings.set_speculative(spec.NGRAM)
        assert loop.run_until_complete(ctx.bridge.load("bundled"))
        assert ctx.bridge.local.engine.config.speculative == spec.NGRAM
    finally:
        loop.run_until_complete(ctx.bridge.shutdown(timeout=2.0))
