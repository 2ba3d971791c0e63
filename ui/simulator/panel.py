"""The load simulator panel: settings, Start/Stop, a progress line, the results table and
the summary. A SimulationRun (app/simulator/run.py) does the work and saves the run to
the history store; this only shows it."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QBoxLayout,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.bridge import BridgeState
from app.context import AppContext
from app.file_names import file_name
from app.remote import Connection, RemoteError
from app.simulator.config import SimConfig, SimConfigError
from app.simulator.export_run import format_for, run_for_export, write_run
from app.simulator.run import SimRow, SimulationRun
from app.simulator.targets import open_target

from .. import file_dialogs
from .config_form import ConfigForm
from .results_table import ResultsModel, make_results_view
from .summary_view import SummaryView
from .target_picker import TargetPicker

log = logging.getLogger(__name__)

PROGRESS_MS = 250
WIDE_LAYOUT = 640  # form beside the results from this width on, above them below it
FAILED = ("error", "shutdown")  # as app.simulator.workload.summarize counts them
JSON_FILTER = "JSON, the whole run (*.json)"
CSV_FILTER = "CSV, one line per request (*.csv)"


class SimulatorPanel(QWidget):
    """`run_finished()` fires once a run has ended (normally, stopped or failed).

    `ask_save_path(name)` picks the export file (tests replace it)."""

    run_finished = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.run: SimulationRun | None = None
        self.task: asyncio.Task[None] | None = None
        self._running = False  # from Start until the run's task is over (or about to be)
        self.ask_save_path = self._ask_save_path

        self.form = ConfigForm()
        self.form.changed.connect(self._check_form)
        self.target = TargetPicker(ctx.settings)
        self.target.currentIndexChanged.connect(lambda _i: self._update_buttons())
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("simStart")
        self.start_button.clicked.connect(lambda: self.start())
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("simStop")
        self.stop_button.clicked.connect(self.stop)
        self.error = QLabel()
        self.error.setObjectName("errorLabel")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QLabel("Not started.")
        self.progress.setObjectName("simProgress")
        self.progress.setWordWrap(True)
        self.results = ResultsModel(self)
        self.table = make_results_view(self.results)
        self.summary = SummaryView()
        self.summary.export_button.clicked.connect(lambda: self.export())

        target_row = QHBoxLayout()
        target_row.addWidget(QLabel("Target"))
        target_row.addWidget(self.target, 1)
        button_row = QHBoxLayout()
        button_row.addWidget(self.start_button)
        button_row.addWidget(self.stop_button)
        button_row.addWidget(self.error, 1)
        # the target beside the buttons when wide, above them when narrow (resizeEvent)
        self.controls = QBoxLayout(QBoxLayout.Direction.TopToBottom)
        self.controls.addLayout(target_row)
        self.controls.addLayout(button_row, 1)
        scroll = QScrollArea()
        scroll.setWidget(self.form)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setMinimumWidth(180)
        right = QSplitter(Qt.Orientation.Vertical)
        right.setChildrenCollapsible(False)
        right.addWidget(self.table)
        right.addWidget(self.summary)
        right.setSizes([260, 260])
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setChildrenCollapsible(False)
        split.addWidget(scroll)
        split.addWidget(right)
        split.setStretchFactor(1, 1)
        split.setSizes([300, 600])
        self.split = split
        col = QVBoxLayout(self)
        col.setContentsMargins(4, 4, 4, 4)
        col.addLayout(self.controls)
        col.addWidget(self.progress)
        col.addWidget(split, 1)

        self._timer = QTimer(self)  # progress and elapsed time, a few times a second
        self._timer.setInterval(PROGRESS_MS)
        self._timer.timeout.connect(self._show_progress)
        ctx.bridge.state_changed.connect(self._on_state)
        self._on_state(ctx.bridge.state, ctx.bridge.message)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        # Narrow dock: the form above the results rather than beside them, and the target
        # above Start / Stop, so every control stays in view without a sideways scroll.
        wide = event.size().width() >= WIDE_LAYOUT
        orientation = Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical
        if self.split.orientation() != orientation:
            self.split.setOrientation(orientation)
        direction = QBoxLayout.Direction.LeftToRight if wide else \
            QBoxLayout.Direction.TopToBottom
        if self.controls.direction() != direction:
            self.controls.setDirection(direction)

    # -- state --------------------------------------------------------------------------
    @property
    def is_running(self) -> bool:
        return self._running

    def counts(self) -> Counter[str]:
        """sent, running, completed, cancelled, failed (from the table's rows)."""
        out: Counter[str] = Counter(sent=len(self.results.rows))
        for row in self.results.rows:
            reason = row.finish_reason
            out["running" if reason == "running" else "cancelled" if reason == "cancelled"
                else "failed" if reason in FAILED else "completed"] += 1
        return out

    def _on_state(self, state: BridgeState, _message: str) -> None:
        bridge = self.ctx.bridge
        current, highest = bridge.max_concurrent, bridge.max_concurrent_limit
        if state == BridgeState.READY and current is not None and highest is not None \
                and not self.is_running:
            self.form.set_engine_limits(current, highest)
        elif state != BridgeState.READY and self.is_running and self.run is not None \
                and self.run.target is bridge.streams:  # a server target runs on
            self.run.stop()  # the engine is going away: end the run, everything counted
        self._update_buttons()

    def _update_buttons(self) -> None:
        running = self.is_running
        # a server target needs no local model
        ready = self.ctx.bridge.is_ready or not self.target.is_local
        self.start_button.setEnabled(ready and not running)
        self.stop_button.setEnabled(running and self.run is not None and not self.run.stopped)
        self.form.setEnabled(not running)
        self.target.setEnabled(not running)

    def _check_form(self) -> None:
        try:
            self.form.config().validate()
        except SimConfigError as exc:
            self.error.setText(str(exc))
        else:
            self.error.clear()

    # -- control ------------------------------------------------------------------------
    def start(self) -> bool:
        """Start a run with the form's settings; False (with the reason shown) if refused."""
        if self.is_running:
            return False
        try:
            cfg = self.form.config().validate()
        except SimConfigError as exc:
            self.error.setText(str(exc))
            return False
        if not self.target.is_local:
            conn = self.target.connection()
            if conn is None:
                self.error.setText("That connection no longer exists; pick another target.")
                return False
            self.error.clear()
            self.summary.clear(f"Connecting to {conn.name} …")
            self.results.clear()
            self._running = True
            self.task = asyncio.ensure_future(self._drive_remote(conn, cfg))
            self._update_buttons()
            return True
        if not self.ctx.bridge.is_ready:
            self.error.setText("Load a model first.")
            return False
        self.error.clear()
        self._begin(SimulationRun(self.ctx.bridge.streams, cfg, self.ctx.records))
        self.task = asyncio.ensure_future(self._drive(self.run))
        return True

    def _begin(self, run: SimulationRun) -> None:
        run.sent.connect(self._on_sent)
        run.completed.connect(self._on_completed)
        run.finished.connect(lambda summary: self.summary.show_summary(summary,
                                                                       run.record.title))
        self.run = run
        self.results.clear()
        self.summary.clear(f"Running: {run.record.title} …")
        # A slot may run outside a coroutine (tests, nested loops): schedule on the app loop.
        self._running = True
        self._timer.start()
        self._update_buttons()
        self._show_progress()

    async def _drive_remote(self, conn: Connection, cfg: SimConfig) -> None:
        """Resolve the server's model, run against it over HTTP, close its session."""
        try:
            target = await open_target(conn, cfg.max_concurrent or 16)
        except RemoteError as exc:
            self.error.setText(f"The simulation did not start: {exc}")
            self.summary.clear("The run did not start.")
            self._running = False
            self._update_buttons()
            self.run_finished.emit()
            return
        try:
            title = f"Simulation against {target.description}: {cfg.describe()}"
            self._begin(SimulationRun(target, cfg, self.ctx.records, title))
            assert self.run is not None
            await self._drive(self.run)
        finally:
            await target.client.close()

    def stop(self) -> None:
        """Send nothing more and cancel what is running; the run then finishes as usual."""
        if self.is_running and self.run is not None:
            self.run.stop()
            self._update_buttons()
            self._show_progress()

    async def shutdown(self, timeout: float = 3.0) -> None:
        """The window is closing: stop a run and wait for it (before the engine stops)."""
        self.ctx.bridge.state_changed.disconnect(self._on_state)
        self.target.detach()
        task = self.task
        if self.is_running and task is not None and self.run is not None:
            self.run.stop()
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except TimeoutError:
                log.warning("the simulation did not stop within %.1f s", timeout)
        self._timer.stop()

    async def _drive(self, run: SimulationRun) -> None:
        try:
            await run.start()
        except Exception as exc:  # noqa: BLE001 - e.g. the engine refused the run's limit
            log.warning("simulation failed: %s", exc)
            self.error.setText(f"The simulation failed: {exc}")
            self.summary.clear("The run did not finish.")
        finally:
            self._running = False
            self._timer.stop()
            self._update_buttons()
            self._show_progress()
            self.run_finished.emit()

    def _on_sent(self, row: SimRow) -> None:
        self.results.add(row)

    def _on_completed(self, row: SimRow) -> None:
        self.results.update(row)

    def _show_progress(self) -> None:
        run = self.run
        if run is None:
            return
        c = self.counts()
        parts = [f"sent {c['sent']}", f"running {c['running']}",
                 f"completed {c['completed']}", f"cancelled {c['cancelled']}",
                 f"failed {c['failed']}"]
        if run.summary is not None:
            seconds = run.summary["duration_s"]
            state = "Stopped" if run.stopped else "Finished"
        else:
            seconds = run.elapsed_s
            state = "Stopping" if run.stopped else "Running"
        text = f"{state}: {' · '.join(parts)} · {seconds:.1f} s"
        if self.progress.text() != text:
            self.progress.setText(text)

    # -- export -------------------------------------------------------------------------
    def export(self, path: str | None = None) -> bool:
        """Write the last finished run to `path` (asked for when None); .csv = the results
        as CSV, else the whole run as JSON. True when the file was written."""
        run = self.run
        if run is None or run.summary is None:
            return False
        if path is None:
            path = self.ask_save_path(file_name(run.record.title, "simulation"))
            if not path:
                return False
        loaded = run_for_export(self.ctx.history_reader, run.record, self.results.rows)
        try:
            write_run(loaded, path, format_for(path))
        except OSError as exc:
            self.error.setText(f"Export failed: {exc}")
            return False
        self.summary.heading.setText(f"{run.record.title}: exported to {path}")
        return True

    def _ask_save_path(self, name: str) -> str:
        path, chosen = QFileDialog.getSaveFileName(self, "Export simulation run",
                                                   file_dialogs.start_path(f"{name}.json"),
                                                   f"{JSON_FILTER};;{CSV_FILTER}")
        file_dialogs.remember(path)
        if path and chosen == CSV_FILTER and not path.lower().endswith(".csv"):
            path = str(Path(path).with_suffix(".csv"))  # the filter picks the format
        return path
