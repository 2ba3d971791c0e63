"""The real window keeps the history's writer in its Workspace only: no public attribute of
the context, the sidebar (and its actions), the API server, the simulator (its panel and a
finished run), the history controller or its dialog reaches the writer or its store, by type
(tests/app/test_one_store_writer.py's walk). The window still saves through their entries."""

from __future__ import annotations

from app.history.writer import HistoryWriter
from tests.app.test_one_store_writer import handed_out
from tests.ui.test_simulator_panel import click, configure, open_panel, wait_finished


def test_no_part_of_the_window_hands_out_the_writer(history_app, loop, qtbot):
    window = history_app.start()
    assert isinstance(window.workspace._history, HistoryWriter)  # the one holder
    panel = open_panel(window, qtbot)
    configure(panel, requests=2, burst=2)
    click(qtbot, panel.start_button)
    wait_finished(loop, panel)
    dialog = window.history.show_history()
    assert [e for e in dialog.entries if e.kind == "sim_run"]  # saved through the entries
    assert window.sidebar is not None
    for root, name in ((window.ctx, "ctx"), (window.sidebar, "sidebar"),
                       (window.sidebar.actions, "sidebar.actions"),
                       (window.api_server, "api_server"), (window.sim_dock, "sim_dock"),
                       (panel, "simulator"), (panel.run, "simulator.run"),
                       (window.history, "history"), (dialog, "dialog"),
                       (window.workspace, "workspace"), (window.lifecycle, "lifecycle")):
        found = list(handed_out(root, name, depth=3))
        assert not found, found
