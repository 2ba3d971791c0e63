"""Chat → Speculative decoding → Draft model… (issue #31): the model picked in the file
dialog is saved as "draft:PATH", the next load drafts with it, and a draft model that cannot
be used fails the load with a message naming it (the banner), not a traceback."""

from __future__ import annotations

from app import speculative as spec
from app.bridge import BridgeState, EngineBridge
from app.settings import Settings
from tests.tiny_model import save_mlx_dir
from tests.ui.conftest import run_until


def test_a_draft_model_is_chosen_saved_and_used_at_the_next_load(
        make_window, make_engine, loop, settings, tiny, tmp_path, monkeypatch):
    draft_dir = save_mlx_dir(tiny, tmp_path / "small-draft")

    def load(source: str):  # the window's loader: the setting, read at each load
        from app.backend.local_target import window_config
        from engine import EngineConfig

        return make_engine(speculative=window_config(EngineConfig(),
                                                     lambda: settings.speculative).speculative)

    bridge = EngineBridge(loader=load)
    window = make_window(bridge)
    assert loop.run_until_complete(window.load_model("tiny"))
    menu = window.speculative_menu
    assert menu.actions_by_choice["draft"].isEnabled()

    import ui.speculative_menu as menu_module

    picked = [str(draft_dir / "config.json")]  # a file in an mlx-lm folder: the folder
    monkeypatch.setattr(menu_module.QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (picked[0], "")))
    menu.actions_by_choice["draft"].trigger()
    chosen = f"draft:{draft_dir}"
    assert settings.speculative == chosen
    assert Settings.load(settings.path).speculative == chosen  # saved
    assert menu.actions_by_choice["draft"].isChecked()
    assert menu.actions_by_choice["draft"].text() == "&Draft model (small-draft)…"
    menu.apply_now.trigger()
    run_until(loop, lambda: (s := bridge.stats()) is not None and s.speculative == chosen)
    from engine import testing

    source = testing.facts(bridge.local.engine).draft_source
    assert source.description.startswith("small-draft")
    menu.refresh()
    assert menu.note.text() == "Now running: Draft model (small-draft)"

    # a draft model that is not there: the load fails, saying which and why
    picked[0] = str(tmp_path / "gone" / "small.gguf")
    menu.actions_by_choice["draft"].trigger()
    assert settings.speculative == f"draft:{picked[0]}"
    assert not loop.run_until_complete(window.load_model("tiny"))
    assert bridge.state == BridgeState.READY  # the model in use keeps serving
    shown = window.banner.label.text()
    assert window.banner.isVisible() and "Traceback" not in shown
    assert f"draft model {picked[0]}" in shown and "no such file" in shown
    menu.actions_by_choice[spec.OFF].trigger()  # back to a model that loads
    assert loop.run_until_complete(window.load_model("tiny"))
    loop.run_until_complete(bridge.shutdown(timeout=2.0))
