"""Issue #49: Preferences shows the reasoning defaults (thinking on/off, effort, budget) a
new tab starts with, saves them, and a new tab's settings panel starts from them; the
built-in values are the model's own way (none)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.settings import Settings
from tests.ui.test_preferences import open_with_shortcut

SAVED = {"thinking": "on", "effort": "high", "budget": 512}


def test_preferences_show_and_save_the_reasoning_defaults(window, settings, loop,
                                                          qtbot) -> None:
    settings.set_defaults(settings.defaults.system_prompt,
                          settings.defaults.params | {"reasoning": SAVED})
    dialog = open_with_shortcut(window, loop, qtbot)
    box = dialog.reasoning
    assert box.isVisible()
    assert (box.thinking.currentText(), box.effort.currentText(), box.budget.value()) == (
        "On", "High", 512)
    assert box.value() == SAVED

    box.effort.setCurrentIndex(box.effort.findData("low"))
    box.budget.setValue(-1)  # no limit
    assert box.budget.text() == "no limit"
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible()
    kept = {"thinking": "on", "effort": "low"}
    assert Settings.load(settings.path).defaults.params["reasoning"] == kept

    tab = window.new_tab()
    assert tab.conversation.params["reasoning"] == kept
    assert tab.panel.reasoning.value() == kept and tab.panel.overrides() == {}

    # built-in values: the model's own way, saved as no setting at all
    dialog = open_with_shortcut(window, loop, qtbot)
    assert dialog.reasoning.value() == kept  # opened again: the saved defaults
    qtbot.mouseClick(dialog.builtin_button, Qt.MouseButton.LeftButton)
    assert dialog.reasoning.value() is None
    assert dialog.reasoning.thinking.currentText() == "Model default"
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert "reasoning" not in Settings.load(settings.path).defaults.params
