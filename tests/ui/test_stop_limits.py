"""Stop strings beyond the limits (issue #15, item 6) are named in the tab's settings panel
as they are typed, and are not applied; within the limits they apply again."""

from __future__ import annotations

from engine.sampling_params import MAX_STOP_LENGTH, MAX_STOP_STRINGS


def test_too_many_or_too_long_stop_strings_are_named_and_not_applied(window):
    tab = window.current_tab()
    panel, conv = tab.panel, tab.conversation
    panel.stop.setPlainText("ok")
    assert conv.params["stop"] == ["ok"]
    panel.stop.setPlainText("\n".join(f"s{i}" for i in range(MAX_STOP_STRINGS + 1)))
    assert panel.error.isVisibleTo(panel)
    assert f"at most {MAX_STOP_STRINGS} are allowed" in panel.error.text()
    assert conv.params["stop"] == ["ok"]  # the last valid settings stay in force
    panel.stop.setPlainText("x" * (MAX_STOP_LENGTH + 1))
    assert f"at most {MAX_STOP_LENGTH} are allowed" in panel.error.text()
    panel.stop.setPlainText("end")
    assert not panel.error.isVisibleTo(panel) and conv.params["stop"] == ["end"]
