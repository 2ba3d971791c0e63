"""The stats panel on the tiny model: its numbers equal the engine's counts and the streams'
tokens; it keeps up with 16 streams without freezing the event loop."""

from __future__ import annotations

from PySide6.QtGui import QKeySequence

from app.process_memory import OVERHEAD_BYTES
from app.stats.memory import memory_figures
from engine.public import format_bytes
from tests.ui.chart_reading import point_counts
from tests.ui.conftest import run_until, spin
from tests.ui.lag_run import stream_tabs
from ui.stats.table import COLUMNS


def test_panel_numbers_equal_the_engine_after_a_known_workload(window, loop, qtbot):
    dock = window.stats_dock
    assert dock.isHidden() and dock.panel is None  # built on first show
    assert dock.toggleViewAction().shortcut() == QKeySequence("Ctrl+Shift+S")
    dock.toggleViewAction().trigger()
    assert dock.isVisible() and dock.panel is not None

    tabs = [window.current_tab()] + [window.new_tab() for _ in range(5)]
    for i, tab in enumerate(tabs):
        window.set_tab_title(tab, f"Job {i}")
    victim = tabs[5]
    victim.panel.fields["max_tokens"].setValue(400)
    for i, tab in enumerate(tabs):
        assert tab.conversation.send(f"prompt number {i}")
    run_until(loop, lambda: len(victim.conversation.generation.stream.tokens) >= 2)
    dock.refresh(poll=True)
    live = {r.request_id: r for r in dock.model.rows}
    assert victim.conversation.generation.request_id in live
    victim.conversation.stop()
    run_until(loop, lambda: not any(t.conversation.is_busy for t in tabs))
    spin(loop, 0.05)

    dock.refresh(poll=True)
    engine = window.ctx.bridge.local.engine
    s = engine.stats()
    gens = [t.conversation.generations[-1] for t in tabs]
    values = {k: label.text() for k, label in dock.panel.values.items()}
    assert values["completed"] == str(s.completed) == "5"
    assert values["cancelled"] == str(s.cancelled) == "1"
    assert values["failed"] == str(s.failed) == "0"
    assert values["active"] == str(s.active) == "0"
    assert values["queued"] == str(s.queued) == "0"
    total = sum(len(g.stream.tokens) for g in gens)
    assert values["generated"] == str(s.total_generated_tokens) == str(total)
    assert values["prompt"] == str(s.total_prompt_tokens)
    assert values["budget"] == str(s.budget)
    assert values["ttft"] != "–" and values["itl"] != "–"
    assert values["gaps"] == f"{s.itl_p99_s * 1000:.0f} / {s.itl_max_s * 1000:.0f} ms"  # #26

    table = dock.panel.table_model
    shown = {r.request_id: r for r in table.rows}
    assert table.rowCount() == len(shown) == 6
    for tab, gen in zip(tabs, gens, strict=True):
        row = shown[gen.request_id]
        state = "cancelled" if gen.finish_reason == "cancelled" else "finished"
        assert (row.source, row.state) == (tab.conversation.title, state)
        assert row.generated_tokens == len(gen.stream.tokens) == gen.stream.stats.generated_tokens
        assert row.finish_reason == gen.finish_reason
        at = table.rows.index(row)
        assert table.data(table.index(at, COLUMNS.index("Generated"))) == str(
            len(gen.stream.tokens))
        assert table.data(table.index(at, COLUMNS.index("Cached"))) == str(
            gen.stream.stats.cached_tokens)
    assert shown[gens[5].request_id].finish_reason == "cancelled"
    assert all(shown[g.request_id].finish_reason == "length" for g in gens[:5])

    counts = point_counts(dock.panel.charts)
    assert counts["tokens_per_s"] >= 2 and counts["step_ms"] == counts["budget"] >= 2


def test_panel_shows_conversation_memory_as_the_engine_counts_it(window, loop):
    dock = window.stats_dock
    dock.show()
    tab = window.current_tab()
    gens = []
    for text in ("first turn", "second turn", "third turn"):
        assert tab.conversation.send(text)
        gens.append(tab.conversation.generation)
        run_until(loop, lambda: not tab.conversation.is_busy)
    spin(loop, 0.05)
    dock.refresh(poll=True)
    s = window.ctx.bridge.local.engine.stats()
    values = {k: label.text() for k, label in dock.panel.values.items()}
    expected = dict(memory_figures(s).texts())
    del expected["process"]  # the process's memory now: test_panel_shows_the_process_memory
    assert {k: values[k] for k in expected} == expected
    # Later turns reuse the earlier ones' KV, and the panel says so.
    assert s.prefix_hits == 2 and s.prefix_lookups == 3
    assert (values["hit_rate"], values["hits"]) == (f"{100 * s.prefix_hit_rate:.0f}% of tokens",
                                                   "2 of 3")
    assert s.prefix_cached_bytes > 0 and s.kv_budget_bytes > 0
    assert not values["kv"].startswith("0 B") and values["disk"] == "none"
    # how the budget was chosen (issue #28): the engine's own words, in the KV line's tooltip
    assert s.kv_budget_basis.startswith(("default: ", "set: "))
    assert memory_figures(s).kv_detail in dock.panel.values["kv"].toolTip()
    assert s.kv_budget_basis in dock.panel.values["kv"].toolTip()
    assert "0 saved, 0 loaded" in dock.panel.values["disk"].toolTip()
    table = dock.panel.table_model
    cached = {r.request_id: table.data(table.index(i, COLUMNS.index("Cached")))
              for i, r in enumerate(table.rows)}
    assert [cached[g.request_id] for g in gens] == [str(g.stream.stats.cached_tokens)
                                                    for g in gens]
    assert int(cached[gens[-1].request_id]) > int(cached[gens[1].request_id]) > 0

    # A live request shows its cached tokens as soon as it is admitted.
    third = int(cached[gens[-1].request_id])
    tab.panel.fields["max_tokens"].setValue(400)
    assert tab.conversation.send("fourth turn")
    live = tab.conversation.generation
    run_until(loop, lambda: len(live.stream.tokens) >= 2)
    dock.refresh(poll=True)
    [row] = [r for r in table.rows if r.request_id == live.request_id]
    [engine_row] = [r for r in window.ctx.bridge.local.engine.request_rows()
                    if r.request_id == live.request_id]
    assert row.state == "generating" and engine_row.cached_tokens > third
    assert table.data(table.index(table.rows.index(row), COLUMNS.index("Cached"))) == str(
        engine_row.cached_tokens)
    tab.conversation.stop()
    run_until(loop, lambda: not tab.conversation.is_busy)


def test_a_queued_request_has_no_cached_count_yet(qtbot):
    from app.stats.model import TableRow
    from ui.stats.table import RequestTableModel

    model = RequestTableModel()
    model.set_rows([TableRow("q", "Chat", "queued", 40, 0, None, 0.0),
                    TableRow("g", "Chat", "generating", 40, 3, 0.1, 9.0, cached_tokens=32)])
    column = COLUMNS.index("Cached")
    assert [model.item(r, column).text() for r in range(2)] == ["", "32"]


def test_panel_keeps_up_with_sixteen_streams(window, loop, capsys):
    window.stats_dock.show()
    refreshes = window.stats_dock.refreshes
    result = loop.run_until_complete(stream_tabs(window, tabs=16, max_tokens=300))
    dock = window.stats_dock
    done = dock.refreshes - refreshes
    with capsys.disabled():
        print(f"\n[lag] tiny model, 16 tabs + stats panel: {result.tokens} tokens in "
              f"{result.wall_s:.2f} s, {done} panel refreshes "
              f"({1000 * dock.refresh_s / max(1, dock.refreshes):.1f} ms each), "
              f"{result.summary()}")
    assert result.tokens == 16 * 300
    assert done >= result.wall_s / 0.5 - 2  # it updated twice a second throughout
    # generous: a frozen loop shows up as seconds. While streaming the loop answers within
    # 250 ms (p99); the 16 sends themselves may hold it longer on a loaded machine (290 ms
    # once in CI with 3 test processes on 2 cores; 95-160 ms alone), never a second.
    assert result.streaming_samples >= 10 and result.streaming_p99_ms < 250
    assert result.max_ms < 1000
    dock.refresh(poll=True)
    assert dock.panel.values["completed"].text() == str(window.ctx.bridge.stats().completed)


def test_panel_shows_the_process_memory_against_its_bound(window, loop):
    """Issue #46 item 14: resident memory, of start + KV budget + 512 MiB; red above it."""
    dock = window.stats_dock
    dock.show()
    local = window.ctx.bridge.local
    tab = window.current_tab()
    assert tab.conversation.send("a turn")
    run_until(loop, lambda: not tab.conversation.is_busy)
    dock.refresh(poll=True)
    label = dock.panel.values["process"]
    start, budget = local.resident_at_start, local.engine.stats().kv_budget_bytes
    assert start is not None and budget > 0
    assert local.memory_bound() == start + budget + OVERHEAD_BYTES
    shown, _of, bound = label.text().partition(" of ")
    assert bound == format_bytes(local.memory_bound()) and shown.endswith(("MiB", "GiB"))
    assert "color" not in label.styleSheet()

    local.resident_at_start = (1 << 20) - budget - OVERHEAD_BYTES  # a bound of 1 MiB: over it
    dock.refresh(poll=True)
    assert label.text().endswith(" of 1.0 MiB") and "color" in label.styleSheet()
