"""The simulator panel against servers: BatchChat's own API server (over HTTP, in-process
on loopback) with goodput limits drawn on the chart; a saved connection; a server that
cannot be reached is reported and the panel stays usable."""

from __future__ import annotations

from typing import Any

import pytest

from app.remote import Connection
from app.server import ApiServer, ServerConfig
from tests.ui.chart_reading import limits_drawn
from tests.ui.conftest import run_until
from tests.ui.test_simulator_panel import click, configure, open_panel, wait_finished
from ui.simulator.target_picker import OWN

KEY = "sk-sim"


@pytest.fixture
def own_server(ctx: Any, loop: Any, settings: Any) -> Any:
    finished: list[Any] = []
    server = ApiServer(lambda: ctx.bridge.local, lambda: "tiny",
                       ServerConfig(port=0, api_key=KEY), on_finished=finished.append)
    url = loop.run_until_complete(server.start())
    settings.server_port = server.port
    settings.server_api_key = KEY
    server.finished = finished  # type: ignore[attr-defined]
    yield server, url
    loop.run_until_complete(server.stop())


def test_run_against_own_server_shows_goodput_and_limits(history_app, loop, qtbot,
                                                         own_server):
    server, _url = own_server
    window = history_app.start()
    panel = open_panel(window, qtbot)
    panel.target._fill()  # the port the fixture chose
    panel.target.choose(OWN)
    configure(panel, requests=4, burst=4, tokens=(4, 6))
    panel.form.slo_ttft.setValue(600.0)  # every request meets these generous limits...
    panel.form.slo_e2e.setValue(900.0)
    click(qtbot, panel.start_button)
    summary = wait_finished(loop, panel)
    assert summary["completed"] == 4 and summary["failed"] == 0
    assert len(server.finished) == 4  # the server answered every one
    assert summary["target"].startswith("BatchChat server (tiny)")
    assert summary["slo_met"] == 4 and summary["goodput"] > 0
    assert panel.summary.values["goodput"].text().endswith("(4 of 4 met)")
    assert limits_drawn(panel.summary) == {"ttft_s": 600.0, "e2e_s": 900.0}
    assert panel.run.record.config["slo_ttft_s"] == 600.0

    # ...a TPOT limit of 1 ms counts only the requests that met it; TPOT is not on the chart
    panel.form.slo_ttft.setValue(0.0)
    panel.form.slo_e2e.setValue(0.0)
    panel.form.slo_tpot.setValue(0.001)
    click(qtbot, panel.start_button)
    summary = wait_finished(loop, panel)
    met = sum((r.tpot_s or 0.0) <= 0.001 for r in panel.run.results)
    assert summary["slo_met"] == met
    assert summary["goodput"] == pytest.approx(met / summary["duration_s"])
    assert limits_drawn(panel.summary) == {}
    run_until(loop, lambda: panel.start_button.isEnabled())


def test_run_against_a_connection_and_an_unreachable_one(window, loop, qtbot, settings,
                                                         own_server):
    _server, url = own_server
    settings.set_connections([Connection(url, model="tiny", api_key=KEY, name="lab"),
                              Connection("http://127.0.0.1:9", model="x", name="gone",
                                         connect_timeout_s=2)])
    panel = open_panel(window, qtbot)
    panel.target.choose("gone")
    configure(panel, requests=2, burst=2, tokens=(3, 3))
    click(qtbot, panel.start_button)
    summary = wait_finished(loop, panel)
    assert summary["failed"] == 2 and summary["goodput"] is None
    assert panel.summary.values["goodput"].text() == "–"
    assert all("cannot reach" in (row.error or "") for row in panel.results.rows)

    panel.target.choose("lab")
    click(qtbot, panel.start_button)
    summary = wait_finished(loop, panel)
    assert summary["completed"] == 2 and summary["target"] == "lab (tiny)"


def test_compare_runs_against_two_targets(history_app, loop, qtbot, own_server):
    window = history_app.start()
    panel = open_panel(window, qtbot)
    panel.target._fill()
    configure(panel, requests=3, burst=3, tokens=(4, 4))
    click(qtbot, panel.start_button)  # the local engine
    wait_finished(loop, panel)
    panel.target.choose(OWN)
    click(qtbot, panel.start_button)  # the same workload over HTTP
    wait_finished(loop, panel)

    dialog = window.history.show_history()
    runs = [i for i in range(dialog.list.topLevelItemCount())
            if dialog.list.topLevelItem(i).text(1) == "simulation"]
    assert len(runs) == 2
    dialog.list.topLevelItem(runs[0]).setSelected(True)
    assert not dialog.compare_button.isEnabled()  # one run: nothing to compare
    assert dialog.compare_selected() is None
    dialog.list.topLevelItem(runs[1]).setSelected(True)
    assert dialog.compare_button.isEnabled()
    compare = dialog.compare_selected()
    table = compare.table
    assert table.columnCount() == 2
    names = [table.verticalHeaderItem(i).text() for i in range(table.rowCount())]
    targets = {table.item(names.index("target"), j).text() for j in range(2)}
    assert any(t.startswith("local engine (") for t in targets)
    assert any(t.startswith("BatchChat server (tiny)") for t in targets)
    assert {table.item(names.index("completed"), j).text() for j in range(2)} == {"3"}
    for e2e, ttft in compare.curves:  # three completed requests each, sorted
        ys = list(e2e.getData()[1])
        assert len(ys) == 3 and ys == sorted(ys) and len(ttft.getData()[1]) == 3
    compare.close()
