"""The KV cache's form in the window (issue #54, the app): Preferences → KV cache is saved,
survives a restart of the settings, and reaches EngineConfig.kv_bits at the reload Save
starts (through the switch question when replies run); the stats panel says the engine's
form and its tokens per MiB."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.bridge import EngineBridge
from app.context import AppContext
from app.settings import Settings
from tests.engine.conftest import quantized_tiny, skip_without_native
from tests.ui.conftest import run_until
from ui.finish_or_stop import Choice
from ui.preferences import open_preferences


@pytest.fixture(scope="module")
def make_engine() -> Any:
    """`make_engine(**config)`: an Engine on a tiny model the packed KV takes (head size 32,
    4-bit weights: the native kernels read it; engine tests' qtiny)."""
    skip_without_native()
    from engine import Engine, EngineConfig

    tiny = quantized_tiny(seed=11, hidden=128)

    def build(**config: Any) -> Any:
        return Engine(tiny.model, tiny.tokenizer, eos_token_ids=[],
                      context_length=tiny.context_length, config=EngineConfig(**config),
                      description="tiny test model")

    return build


def window_on_the_setting(make_window: Any, make_engine: Any, settings: Settings,
                          built: list[Any]) -> Any:
    """A window whose loader builds each engine as the app's does: the settings' KV form
    read at each load (app/bridge/local_target.window_config)."""
    def load(source: str) -> Any:
        from app.backend.local_target import window_config
        from engine import EngineConfig

        config = window_config(EngineConfig(), kv_bits=lambda: settings.kv_bits)
        built.append(config)
        return make_engine(kv_bits=config.kv_bits)

    return make_window(EngineBridge(loader=load))


def choose(window: Any, text: str) -> Any:
    """Preferences → KV cache → `text`, then Save; the dialog."""
    dialog = open_preferences(window.ctx.settings, window, window.reload_model)
    combo = dialog.kv_bits
    assert [combo.itemText(i) for i in range(combo.count())] == ["float", "8-bit", "4-bit"]
    combo.setCurrentIndex(combo.findText(text))
    assert dialog.save()
    return dialog


def panel_line(window: Any) -> str:
    dock = window.stats_dock
    dock.show()
    dock.refresh(poll=True)
    return dock.panel.values["kv_form"].text()


def test_8_bit_in_preferences_reloads_an_engine_that_holds_more_tokens(
        make_window, make_engine, loop, settings):
    built: list[Any] = []
    window = window_on_the_setting(make_window, make_engine, settings, built)
    bridge = window.ctx.bridge
    assert loop.run_until_complete(window.load_model("tiny"))
    assert built[-1].kv_bits is None
    float_stats = bridge.stats()
    assert float_stats.kv_bits == 0 and float_stats.kv_tokens_per_mib > 0
    assert panel_line(window) == f"float · {float_stats.kv_tokens_per_mib:,.0f} tokens/MiB"
    old = bridge.local.engine

    choose(window, "8-bit")
    assert settings.kv_bits == 8
    run_until(loop, lambda: bridge.local is not None and bridge.local.engine is not old
              and (s := bridge.stats()) is not None and s.kv_bits == 8)
    assert built[-1].kv_bits == 8 and bridge.source == "tiny"
    eight = bridge.stats()
    # int8 values with a scale per group of 64 against the tiny model's float32 values
    assert eight.kv_tokens_per_mib > 1.9 * float_stats.kv_tokens_per_mib
    line = panel_line(window)
    assert line == f"8-bit · {eight.kv_tokens_per_mib:,.0f} tokens/MiB"
    assert "tokens of context one MiB" in window.stats_dock.panel.values["kv_form"].toolTip()

    # the setting survives a restart: a new Settings read from the same file
    again = Settings.load(settings.path)
    assert again.kv_bits == 8
    assert open_preferences(again, window).kv_bits.currentText() == "8-bit"
    loop.run_until_complete(bridge.shutdown(timeout=2.0))


def test_save_without_a_change_reloads_nothing(make_window, make_engine, loop, settings):
    built: list[Any] = []
    window = window_on_the_setting(make_window, make_engine, settings, built)
    assert loop.run_until_complete(window.load_model("tiny"))
    old = window.ctx.bridge.local.engine
    choose(window, "float")
    loop.run_until_complete(asyncio.sleep(0.2))  # time for a reload, were one started
    assert len(built) == 1 and window.ctx.bridge.local.engine is old
    loop.run_until_complete(window.ctx.bridge.shutdown(timeout=2.0))


def test_a_running_reply_is_asked_about_first_and_cancel_keeps_the_float_engine(
        make_window, make_engine, loop, settings):
    built: list[Any] = []
    window = window_on_the_setting(make_window, make_engine, settings, built)
    bridge = window.ctx.bridge
    assert loop.run_until_complete(window.load_model("tiny"))
    old = bridge.local.engine
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(400)
    assert tab.send_text("Tell a long story")
    msg = tab.conversation.messages[-1]
    run_until(loop, lambda: len(msg.content) > 3)

    choose(window, "4-bit")
    run_until(loop, lambda: window.switch_question is not None)
    assert settings.kv_bits == 4  # saved: the next load takes it whatever the answer
    window.switch_question.buttons[None].click()  # cancel: no reload now
    run_until(loop, lambda: window.switch_question is None)
    assert bridge.local.engine is old and bridge.stats().kv_bits == 0
    assert msg.streaming or msg.finish_reason == "length"

    choose(window, "float")  # back to what runs: a change of the setting, so asked again
    run_until(loop, lambda: window.switch_question is not None)
    window.switch_question.buttons[Choice.STOP].click()
    run_until(loop, lambda: bridge.local is not None and bridge.local.engine is not old)
    assert built[-1].kv_bits is None and bridge.stats().kv_bits == 0
    loop.run_until_complete(bridge.shutdown(timeout=2.0))


def test_a_bad_saved_value_keeps_float(settings):
    settings.set_kv_bits(8)
    text = settings.path.read_text().replace('"kv_bits": 8', '"kv_bits": 5')
    settings.path.write_text(text)
    assert Settings.load(settings.path).kv_bits is None
    with pytest.raises(ValueError, match="float, 8 or 4 bits"):
        settings.set_kv_bits(5)
    assert settings.set_kv_bits(16) and settings.kv_bits is None  # 16 is float


@pytest.mark.bundled
def test_the_apps_own_loader_keeps_the_kv_the_setting_names(loop, settings, tmp_path,
                                                           monkeypatch):
    monkeypatch.setenv("BATCHCHAT_DATA_DIR", str(tmp_path / "data"))
    ctx = AppContext.create(settings)
    try:
        assert loop.run_until_complete(ctx.bridge.load("bundled"))
        floats = ctx.bridge.stats()
        assert floats.kv_bits == 0
        settings.set_kv_bits(8)
        assert loop.run_until_complete(ctx.bridge.load("bundled"))
        eight = ctx.bridge.stats()
        assert ctx.bridge.local.engine.config.kv_bits == 8 and eight.kv_bits == 8
        assert eight.kv_tokens_per_mib > 1.5 * floats.kv_tokens_per_mib
    finally:
        loop.run_until_complete(ctx.bridge.shutdown(timeout=2.0))
