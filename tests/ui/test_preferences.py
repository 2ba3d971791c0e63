"""Chat → Preferences… (Ctrl+,): the defaults for new tabs; a tab's overrides of them shown,
reset and made the defaults; a tab's settings saved as a preset (issue #32 item 4, E8)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QInputDialog

from app.defaults import Defaults
from app.settings import Settings
from tests.ui.conftest import FAST, run_until
from ui.compare.targets import target_choices
from ui.preferences import PreferencesDialog

CTRL = Qt.KeyboardModifier.ControlModifier


def open_with_shortcut(window, loop, qtbot) -> PreferencesDialog:
    window.activateWindow()  # shortcuts need an active window
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)
    qtbot.keyClick(window, Qt.Key.Key_Comma, CTRL)
    dialog = window.findChild(PreferencesDialog)
    assert dialog is not None and dialog.isVisible()
    return dialog


def test_defaults_set_in_preferences_are_where_a_new_tab_starts(window, settings, loop,
                                                                qtbot):
    first = window.current_tab()
    dialog = open_with_shortcut(window, loop, qtbot)
    assert dialog.fields["max_tokens"].text() == "12"  # the saved defaults (FAST)
    dialog.system.setPlainText("Answer in one line.")
    dialog.fields["max_tokens"].setText("60")
    dialog.fields["temperature"].setText("0.3")
    dialog.fields["seed"].setText("42")
    dialog.stop.setPlainText("END")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert not dialog.isVisible()
    expected = FAST | {"max_tokens": 60, "temperature": 0.3, "seed": 42, "stop": ["END"]}
    assert Settings.load(settings.path).defaults == Defaults("Answer in one line.", expected)

    tab = window.new_tab()
    assert tab.conversation.params == expected
    assert tab.conversation.system_prompt == "Answer in one line."
    assert tab.panel.fields["max_tokens"].value() == 60 and tab.panel.overrides() == {}
    assert tab.panel.preset.currentText() == "(defaults)"  # no preset has these values
    assert tab.conversation.preset is None
    # the tab already open keeps its own settings, now shown as differing from the defaults
    assert first.conversation.params == FAST
    assert first.panel.preset.currentText() == "Fast"
    assert set(first.panel.overrides()) == {"system_prompt", "temperature", "max_tokens",
                                            "seed", "stop"}
    # opened again, the dialog shows what was saved
    again = open_with_shortcut(window, loop, qtbot)
    assert again is dialog and dialog.fields["max_tokens"].text() == "60"
    assert dialog.fields["seed"].text() == "42"
    dialog.reject()


def test_invalid_input_gets_a_clear_message_and_saves_nothing(window, settings, loop, qtbot):
    settings.save()
    saved = settings.path.read_text()
    dialog = open_with_shortcut(window, loop, qtbot)
    dialog.fields["temperature"].setText("0.5")  # a good value beside a bad one
    dialog.fields["max_tokens"].setText("60k")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert dialog.isVisible()
    assert dialog.error.isVisibleTo(dialog)
    assert dialog.error.text() == ("Max tokens must be a whole number from 1 to 1000000; "
                                   "'60k' is not.")
    assert dialog.fields["max_tokens"].property("invalid") is True
    assert dialog.focusWidget() is dialog.fields["max_tokens"]  # where to type again
    dialog.fields["max_tokens"].setText("60")
    dialog.fields["top_p"].setText("1.5")
    assert not dialog.save()
    assert "Top p must be a number from 0.01 to 1; 1.5 is out of range." == dialog.error.text()
    assert dialog.fields["max_tokens"].property("invalid") is False
    assert settings.path.read_text() == saved
    assert settings.defaults == Defaults(params=FAST)
    assert window.new_tab().conversation.params == FAST
    # the built-in values fill the form; Cancel keeps the saved defaults
    qtbot.mouseClick(dialog.builtin_button, Qt.MouseButton.LeftButton)
    assert dialog.fields["max_tokens"].text() == "512" and not dialog.error.isVisibleTo(dialog)
    dialog.reject()
    assert settings.path.read_text() == saved


def test_a_tabs_overrides_are_marked_and_reset(window, settings, qtbot):
    panel = window.current_tab().panel
    label, reset = panel.labels["temperature"], panel.reset_buttons["temperature"]
    assert panel.overrides() == {} and not reset.isVisibleTo(panel)
    assert not panel.reset_all_button.isEnabled()
    assert label.property("override") is not True and label.text() == "Temperature"
    panel.fields["temperature"].setValue(0.9)
    panel.fields["max_tokens"].setValue(30)
    panel.system.setPlainText("Talk like a pirate.")
    assert label.property("override") is True and label.text() == "Temperature •"
    assert label.toolTip().startswith("default: 0 ")
    assert panel.labels["max_tokens"].toolTip().startswith("default: 12 ")
    assert reset.isVisibleTo(panel) and reset.toolTip() == "Back to the default: 0"
    assert "3 settings differ" in panel.overrides_label.text()
    assert panel.labels["top_p"].property("override") is not True

    qtbot.mouseClick(reset, Qt.MouseButton.LeftButton)
    conv = window.current_tab().conversation
    assert conv.params["temperature"] == 0.0 and conv.params["max_tokens"] == 30
    assert label.property("override") is False and not reset.isVisibleTo(panel)
    qtbot.mouseClick(panel.reset_all_button, Qt.MouseButton.LeftButton)
    assert conv.params == FAST and conv.system_prompt == settings.defaults.system_prompt
    assert panel.overrides() == {} and "Same as the defaults" in panel.overrides_label.text()
    # defaults changed elsewhere: the marks follow
    settings.set_defaults("Other.", FAST | {"max_tokens": 99})
    assert set(panel.overrides()) == {"system_prompt", "max_tokens"}
    assert panel.labels["max_tokens"].text() == "Max tokens •"


def test_make_defaults_from_a_tab_then_a_new_tab_inherits_them(window, settings, qtbot):
    """E8: max tokens 60 in this tab, made the defaults: the next tab has 60, not 512."""
    panel = window.current_tab().panel
    panel.fields["max_tokens"].setValue(60)
    assert window.new_tab().conversation.params["max_tokens"] == 12  # not yet the defaults
    window.tabs.setCurrentIndex(0)
    qtbot.mouseClick(panel.make_defaults_button, Qt.MouseButton.LeftButton)
    assert Settings.load(settings.path).defaults.params["max_tokens"] == 60
    assert panel.overrides() == {} and not panel.make_defaults_button.isEnabled()
    new = window.new_tab()
    assert new.conversation.params == FAST | {"max_tokens": 60}
    assert new.panel.fields["max_tokens"].value() == 60


def test_save_as_preset_lists_it_everywhere_presets_are_listed(window, settings, loop, qtbot):
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(60)
    tab.panel.fields["temperature"].setValue(0.4)
    qtbot.mouseClick(tab.panel.save_preset_button, Qt.MouseButton.LeftButton)
    ask = tab.panel.findChild(QInputDialog)
    run_until(loop, lambda: ask.isVisible())
    ask.setTextValue("Sixty")
    ask.accept()
    assert tab.panel.preset.currentText() == "Sixty"
    assert Settings.load(settings.path).preset("Sixty") == FAST | {"max_tokens": 60,
                                                                   "temperature": 0.4}
    other = window.new_tab()
    names = [other.panel.preset.itemText(i) for i in range(other.panel.preset.count())]
    assert "Sixty" in names
    choices = [t.label for t in target_choices(settings, other.conversation.params,
                                               other.conversation.preset)]
    assert "Local · Sixty" in choices
    # applied to another tab
    index = other.panel.preset.findText("Sixty")
    other.panel.preset.setCurrentIndex(index)
    other.panel.preset.activated.emit(index)
    assert other.conversation.params["max_tokens"] == 60
    assert other.conversation.preset == "Sixty"
    # and in Preferences, to fill the defaults from
    dialog = open_with_shortcut(window, loop, qtbot)
    presets = [dialog.preset.itemText(i) for i in range(dialog.preset.count())]
    assert "Sixty" in presets
    dialog.preset.activated.emit(presets.index("Sixty"))
    assert dialog.fields["max_tokens"].text() == "60"
    assert dialog.fields["temperature"].text() == "0.4"
    assert dialog.save()
    assert window.new_tab().conversation.preset == "Sixty"


def test_restored_tabs_keep_their_own_settings(history_app, settings, loop):
    window = history_app.start()
    tab = window.current_tab()
    tab.panel.fields["max_tokens"].setValue(5)
    tab.send_text("hello")
    run_until(loop, lambda: not tab.conversation.is_busy)
    history_app.stop()
    settings.set_defaults("New default.", FAST | {"max_tokens": 60})

    window = history_app.start()
    [restored] = window.chat_tabs()
    assert restored.conversation.params == FAST | {"max_tokens": 5}
    assert restored.conversation.system_prompt != "New default."
    assert set(restored.panel.overrides()) == {"system_prompt", "max_tokens"}
    assert restored.panel.labels["max_tokens"].toolTip().startswith("default: 60 ")
    new = window.new_tab()
    assert (new.conversation.system_prompt, new.conversation.params["max_tokens"]) == \
        ("New default.", 60)


def test_shortcuts_work_after_preferences_close(window, loop, qtbot):
    dialog = open_with_shortcut(window, loop, qtbot)
    run_until(loop, lambda: QApplication.activeWindow() is dialog, timeout=2)
    dialog.fields["max_tokens"].setText("60")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    run_until(loop, lambda: QApplication.activeWindow() is window, timeout=2)
    count = window.tabs.count()
    qtbot.keyClick(QApplication.focusWidget() or window, Qt.Key.Key_T, CTRL)
    assert window.tabs.count() == count + 1
    assert window.current_tab().conversation.params["max_tokens"] == 60
