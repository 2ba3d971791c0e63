"""Export from the history view (Markdown, JSON, CSV, everything) and import it back."""

from __future__ import annotations

import csv
import json

from PySide6.QtCore import Qt

from app.history.export import export_all
from app.storage import SimResult, SimRun
from tests.ui.conftest import run_until
from tests.ui.history_checks import stored


def send(qtbot, tab, text: str) -> None:
    qtbot.keyClicks(tab.input, text)
    qtbot.keyClick(tab.input, Qt.Key.Key_Return)


def chat(window, loop, qtbot, text: str):
    tab = window.current_tab()
    send(qtbot, tab, text)
    run_until(loop, lambda: not tab.conversation.is_busy)
    return tab


def run_action(view, what: str, fmt: str, path) -> None:
    view.ask_save_path = lambda _name, _filter: str(path)
    view.export_actions[(what, fmt)].trigger()
    assert "Exported" in view.message.text(), view.message.text()


def test_session_and_stats_exports(history_app, loop, qtbot, tmp_path):
    window = history_app.start()
    tab = chat(window, loop, qtbot, "Write a haiku about SQLite")
    run = SimRun(title="Sim 1", config={"users": 4}, summary={"tok_s": 12.5})
    history_app.store.save_sim_run(run)
    history_app.store.add_sim_results([SimResult(sim_run_id=run.id, seq=0, prompt="x")])
    view = window.history.show_history()
    assert view.select(tab.conversation.session_id)

    run_action(view, "session", "markdown", tmp_path / "chat.md")
    md = (tmp_path / "chat.md").read_text()
    assert "## User\n\nWrite a haiku about SQLite" in md and "finish: length" in md
    run_action(view, "session", "json", tmp_path / "chat.json")
    doc = json.loads((tmp_path / "chat.json").read_text())
    assert [m["content"] for m in doc["session"]["messages"]] == [
        m.content for m in tab.conversation.messages]
    run_action(view, "stats", "csv", tmp_path / "stats.csv")
    rows = list(csv.DictReader((tmp_path / "stats.csv").open()))
    assert [r["request_id"] for r in rows] == [tab.conversation.generations[0].request_id]
    assert rows[0]["generated_tokens"] == "12"
    run_action(view, "stats", "json", tmp_path / "stats.json")
    assert len(json.loads((tmp_path / "stats.json").read_text())["request_stats"]) == 1
    run_action(view, "sim_runs", "csv", tmp_path / "runs.csv")
    [row] = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert (row["title"], row["summary.tok_s"]) == ("Sim 1", "12.5")
    run_action(view, "sim_runs", "json", tmp_path / "runs.json")
    runs = json.loads((tmp_path / "runs.json").read_text())["sim_runs"]
    assert runs[0]["results"][0]["prompt"] == "x"


def test_export_everything_and_import_into_a_new_database(history_app, loop, qtbot, tmp_path):
    window = history_app.start()
    chat(window, loop, qtbot, "first")
    window.new_tab()
    chat(window, loop, qtbot, "second")
    history_app.store.save_sim_run(SimRun(title="Sim"))
    view = window.history.show_history()
    everything = tmp_path / "all.json"
    run_action(view, "everything", "json", everything)
    s = stored(history_app.db)
    original = export_all(s)
    s.close()
    history_app.stop()

    history_app.db = tmp_path / "other.db"  # a fresh database: import it all there
    window = history_app.start()
    view = window.history.show_history()
    view.ask_open_path = lambda: str(everything)
    view.import_button.click()
    assert view.message.text().startswith("Imported 2 chats"), view.message.text()
    s = stored(history_app.db)
    again = export_all(s)
    s.close()
    ids = {x["id"] for x in original["sessions"]}
    again["sessions"] = [x for x in again["sessions"] if x["id"] in ids]
    # the second window's stats panel takes snapshots of its own as time passes (on a
    # loaded machine, within this test): only the imported ones are compared
    snapshot_ids = {x["id"] for x in original["stats_snapshots"]}
    again["stats_snapshots"] = [x for x in again["stats_snapshots"] if x["id"] in snapshot_ids]
    assert [x["is_open"] for x in original["sessions"]] == [True, True]
    for x in original["sessions"]:  # imported chats come in closed: no tab shows them
        x["is_open"] = False
    assert again == original  # the round trip loses nothing else
    view.import_button.click()  # twice: nothing is added or overwritten
    assert "Imported nothing" in view.message.text()

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    view.ask_open_path = lambda: str(bad)
    view.import_button.click()
    assert view.message.text().startswith("Import failed")
