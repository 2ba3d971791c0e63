"""Importing a malformed export in the history view (issue #15, item 5): the view says
which record and field are wrong, nothing is added, and the window keeps working."""

from __future__ import annotations

import json

from app.history.export import export_all
from tests.ui.history_checks import stored
from tests.ui.test_history_export import chat


def test_a_malformed_export_is_named_in_the_view_and_adds_nothing(history_app, loop, qtbot,
                                                                 tmp_path):
    window = history_app.start()
    tab = chat(window, loop, qtbot, "keep me")
    s = stored(history_app.db)
    doc = export_all(s)
    s.close()
    doc["sessions"][0]["id"] = "a-new-session"  # else the import would skip it as present
    for m in doc["sessions"][0]["messages"]:
        m["session_id"], m["id"] = "a-new-session", m["id"] + "-new"
    del doc["sessions"][0]["messages"][1]["role"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    view = window.history.show_history()
    view.ask_open_path = lambda: str(path)
    view.import_button.click()
    text = view.message.text()
    assert text.startswith("Import failed: sessions[0].messages[1]: messages record "), text
    assert "field role is missing" in text
    s = stored(history_app.db)
    assert [x.id for x in s.list_sessions()] == [tab.conversation.session_id]
    s.close()
    chat(window, loop, qtbot, "still chatting")  # the window goes on
    assert len(tab.conversation.messages) == 4


def test_a_deeply_nested_file_fails_with_the_imports_own_message(history_app, loop, qtbot,
                                                                tmp_path, capfd):
    """100000 nested lists: "Import failed: … too deeply nested", no RecursionError
    traceback on stderr (issue #28), and the window goes on."""
    window = history_app.start()
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    view = window.history.show_history()
    view.ask_open_path = lambda: str(path)
    capfd.readouterr()
    view.import_button.click()
    text = view.message.text()
    assert text.startswith(f"Import failed: {path} is not a BatchChat export: its JSON is "
                           "too deeply nested"), text
    assert "Traceback" not in capfd.readouterr().err
    tab = chat(window, loop, qtbot, "still chatting")
    assert len(tab.conversation.messages) == 2
