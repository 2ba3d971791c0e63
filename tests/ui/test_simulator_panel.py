"""The load simulator panel on the tiny model: a run fills the table and the summary and is
saved; Stop and closing the window end a run with every request accounted for; a bad
setting is refused; a chat tab is admitted before queued simulated requests."""

from __future__ import annotations

import csv
import json

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence

from app.bridge import BridgeState
from tests.ui.chart_reading import bar_heights
from tests.ui.conftest import run_until

FINAL = {"stop", "length", "context", "cancelled", "error", "shutdown"}


def open_panel(window, qtbot):
    dock = window.sim_dock
    action = dock.toggleViewAction()
    assert action.shortcut() == QKeySequence("Ctrl+Shift+L")
    assert dock.isHidden() and dock.panel is None  # built on first show
    action.trigger()
    assert dock.isVisible() and dock.windowTitle() == "Load simulator"
    return dock.panel


def configure(panel, *, requests: int, burst: int = 6, every_s: float = 0.0,
              tokens: tuple[int, int] = (4, 8), concurrency: int | None = None) -> None:
    """Set the form as a user would: bursts, no cancels, greedy, a fixed seed."""
    form = panel.form
    form.arrival.setCurrentIndex(form.arrival.findData("burst"))
    form.burst_size.setValue(burst)
    form.burst_every.setValue(every_s)
    form.requests.setValue(requests)
    form.tokens_min.setValue(tokens[0])
    form.tokens_max.setValue(tokens[1])
    form.temperature.setValue(0.0)
    form.cancel.setValue(0.0)
    form.seed.setValue(7)
    if concurrency is not None:
        form.concurrency.setValue(concurrency)


def click(qtbot, button) -> None:
    assert button.isEnabled()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def wait_finished(loop, panel, timeout: float = 60) -> dict:
    run_until(loop, lambda: panel.run is not None and not panel.is_running, timeout=timeout)
    assert panel.run.summary is not None
    return panel.run.summary


def assert_engine_idle(engine) -> None:
    s = engine.stats()
    assert (s.active, s.queued) == (0, 0)
    assert not [r for r in engine.request_rows() if r.state != "finished"]


def test_a_burst_run_fills_table_and_summary_and_is_saved(history_app, loop, qtbot, tmp_path):
    window = history_app.start()
    panel = open_panel(window, qtbot)
    engine = window.ctx.bridge.local.engine
    assert panel.form.concurrency.value() == engine.max_concurrent  # the engine's limit
    assert panel.form.templates.toPlainText().count("\n") >= 5  # the default set
    configure(panel, requests=6, burst=6)
    assert panel.form.burst_size.isVisible() and not panel.form.rate.isVisible()
    assert not panel.stop_button.isEnabled()
    dialog = window.history.show_history()  # open during the run: refreshed when it ends
    assert not [e for e in dialog.entries if e.kind == "sim_run"]
    click(qtbot, panel.start_button)
    assert panel.is_running and not panel.start_button.isEnabled()
    summary = wait_finished(loop, panel)
    run = panel.run

    # The table: one row per request, each with the finish reason its request ended with.
    model = panel.results
    assert model.rowCount() == 6
    assert [r.index for r in model.rows] == list(range(6))
    reasons = [model.data(model.index(i, 4)) for i in range(6)]
    assert all(reason in FINAL for reason in reasons)
    assert reasons == [r.finish_reason for r in run.results]
    assert [model.data(model.index(i, 3)) for i in range(6)] == \
        [str(r.output_tokens) for r in run.results]

    # The summary shows what the run counted.
    values = panel.summary.values
    for key in ("requests", "completed", "cancelled", "failed"):
        assert values[key].text() == str(summary[key])
    assert summary["requests"] == 6 and summary["completed"] == 6
    assert summary["unaccounted"] == 0 and not summary["stopped"]
    assert values["total_output_tokens"].text() == str(sum(r.output_tokens for r in run.results))
    assert values["ttft_s_p50"].text() != "–"
    ttft, e2e = bar_heights(panel.summary)
    assert len(ttft) == len(e2e) == 6 and all(e > 0 for e in e2e)
    assert "completed 6" in panel.progress.text() and "running 0" in panel.progress.text()
    assert panel.start_button.isEnabled() and not panel.stop_button.isEnabled()
    assert engine.max_concurrent == 16  # the run's limit was put back

    # Saved: the run with its summary and 6 results, in the real SQLite file.
    loaded = window.ctx.history_reader.load_sim_run(run.record.id)
    assert loaded.run.ended_at is not None
    assert loaded.run.summary["completed"] == 6
    assert loaded.run.config["num_requests"] == 6 and loaded.run.config["arrival"] == "burst"
    assert [r.finish_reason for r in loaded.results] == reasons
    assert [r.reply for r in loaded.results] == [r.text for r in run.results]

    # The open history view lists it; Export writes it with the history's formats.
    entry = next(e for e in dialog.entries if e.kind == "sim_run")
    assert (entry.id, entry.count) == (run.record.id, 6)
    dialog.close()
    assert panel.export(str(tmp_path / "run.json"))
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["format"] == "batchchat-sim-runs"
    [saved] = doc["sim_runs"]
    assert saved["id"] == run.record.id and len(saved["results"]) == 6
    assert saved["summary"]["completed"] == 6
    panel.ask_save_path = lambda _name: str(tmp_path / "run.csv")
    click(qtbot, panel.summary.export_button)
    with open(tmp_path / "run.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["finish_reason"] for r in rows] == reasons


def test_b_stop_ends_the_run_with_every_request_accounted(window, loop, qtbot):
    panel = open_panel(window, qtbot)
    engine = window.ctx.bridge.local.engine

    # Stop at once: the run ends without sending anything more.
    configure(panel, requests=12, burst=6, every_s=60.0, tokens=(300, 300))
    click(qtbot, panel.start_button)
    click(qtbot, panel.stop_button)
    assert not panel.stop_button.isEnabled()
    summary = wait_finished(loop, panel)
    assert summary["stopped"] and summary["unaccounted"] == 0
    assert all(r.finish_reason in FINAL for r in panel.results.rows)
    assert summary["requests"] == panel.results.rowCount() <= 6
    assert_engine_idle(engine)
    assert panel.start_button.isEnabled() and not panel.stop_button.isEnabled()

    # Stop mid-run: the first burst is generating, the second one never goes.
    click(qtbot, panel.start_button)
    run_until(loop, lambda: panel.results.rowCount() == 6
              and engine.stats().total_generated_tokens > 0)
    assert panel.counts()["running"] >= 1
    click(qtbot, panel.stop_button)
    summary = wait_finished(loop, panel)
    rows = panel.results.rows
    assert len(rows) == summary["requests"] == 6
    assert all(r.finish_reason in FINAL for r in rows)
    assert summary["cancelled"] >= 1 and summary["unaccounted"] == 0 and summary["stopped"]
    assert summary["completed"] + summary["cancelled"] + summary["failed"] == 6
    assert panel.summary.values["cancelled"].text() == str(summary["cancelled"])
    assert "Stopped" in panel.progress.text() and "running 0" in panel.progress.text()
    assert_engine_idle(engine)
    assert engine.max_concurrent == 16
    assert panel.start_button.isEnabled() and not panel.stop_button.isEnabled()


def test_c_invalid_settings_are_shown_and_refused(window, loop, qtbot):
    panel = open_panel(window, qtbot)
    engine = window.ctx.bridge.local.engine
    configure(panel, requests=3, tokens=(50, 10))
    assert "Max tokens" in panel.error.text() and panel.error.isVisible()
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    assert panel.run is None and not panel.is_running
    assert "Max tokens" in panel.error.text()
    panel.form.templates.setPlainText("   \n")
    panel.form.tokens_max.setValue(60)
    assert "prompt template" in panel.error.text()
    assert not panel.start()
    panel.form.reset_button.click()
    assert panel.error.text() == ""
    assert engine.stats().completed == 0 and not engine.request_rows()

    # Start follows the model: disabled while another model loads, enabled once ready.
    seen = []
    bridge = window.ctx.bridge

    def record(state: BridgeState, _message: str) -> None:
        seen.append((state, panel.start_button.isEnabled()))

    bridge.state_changed.connect(record)  # after the panel's listener: sees its result
    loop.run_until_complete(bridge.load("tiny again"))
    bridge.state_changed.disconnect(record)
    assert seen[0] == (BridgeState.LOADING, False)
    assert seen[-1] == (BridgeState.READY, True)


def test_d_chat_is_admitted_before_queued_simulated_requests(window, loop, qtbot):
    panel = open_panel(window, qtbot)
    engine = window.ctx.bridge.local.engine
    # Concurrency 1: requests run one at a time, so the order they finish in is the order
    # the engine admitted them in.
    configure(panel, requests=6, burst=6, tokens=(200, 200), concurrency=1)
    click(qtbot, panel.start_button)

    def queued_sims() -> list[str]:
        return [r.tag for r in engine.request_rows()
                if r.state == "queued" and (r.tag or "").startswith("sim-")]

    run_until(loop, lambda: len(queued_sims()) >= 4)
    tab = window.current_tab()
    assert tab.conversation.send("hello during the simulation")
    waiting = len(queued_sims())  # sent before the chat, still waiting after it
    assert waiting >= 2
    gen = tab.conversation.generation
    run_until(loop, lambda: not tab.conversation.is_busy)
    summary = wait_finished(loop, panel)

    assert gen.finish_reason == "length" and gen.text
    assert tab.conversation.messages[-1].content == gen.text
    order = [r.tag for r in engine.finished_requests()]
    after_chat = order[order.index(tab.conversation.tag) + 1:]
    assert all(t.startswith("sim-") for t in after_chat)
    # Had the engine served them in arrival order, the chat would have finished last. At
    # most one of `waiting` can slip in ahead: admitted in the tick that began just before
    # the chat arrived.
    assert len(after_chat) >= waiting - 1 >= 1
    assert summary["completed"] == 6 and summary["unaccounted"] == 0
    assert engine.max_concurrent == 16


def test_closing_the_window_stops_a_running_simulation(history_app, loop, qtbot):
    window = history_app.start()
    panel = open_panel(window, qtbot)
    engine = window.ctx.bridge.local.engine
    configure(panel, requests=12, burst=6, every_s=60.0, tokens=(300, 300))
    click(qtbot, panel.start_button)
    run_until(loop, lambda: panel.results.rowCount() == 6
              and engine.stats().total_generated_tokens > 0)
    run = panel.run
    window.close()
    run_until(loop, lambda: window._closed, timeout=10)
    assert not panel.is_running and run.summary is not None
    assert run.summary["stopped"] and run.summary["unaccounted"] == 0
    assert run.summary["cancelled"] >= 1  # stopped before the engine shut down
    loaded = window.ctx.history_reader.load_sim_run(run.record.id)
    assert loaded.run.ended_at is not None and loaded.run.summary["stopped"]
    assert len(loaded.results) == 6
    assert all(r.finish_reason in FINAL for r in loaded.results)
