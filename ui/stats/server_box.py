"""The stats panel's "Server" box: the load of one connection's server, from its Prometheus
/metrics where it has one (vLLM, SGLang, llama.cpp, BatchChat), else what this app's own
requests to it measure (app/remote/metrics.py). Shown only while a connection exists; its
rows once one is chosen."""

from __future__ import annotations

import asyncio

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QComboBox, QGridLayout, QGroupBox, QLabel, QWidget

from app.context import AppContext
from app.remote.backends import UnknownBackend
from app.remote.metrics import LoadProbe, ServerLoad

from ..reflow import narrow_label

POLL_MS = 1000
FIELDS = (("running", "running requests"), ("waiting", "waiting requests"),
          ("prompt_rate", "prompt tokens/s"), ("gen_rate", "generated tokens/s"),
          ("source", "numbers from"))


class ServerStatsBox(QGroupBox):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Server (a connection)", parent)
        self.setObjectName("serverStats")
        self.ctx = ctx
        self.probe: LoadProbe | None = None
        self.last: ServerLoad | None = None
        self._busy = False
        self.picker = QComboBox()
        self.picker.setObjectName("serverStatsPicker")
        # as narrow as the dock (the list, when open, shows the whole names)
        self.picker.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.picker.setMinimumContentsLength(12)
        self.picker.currentIndexChanged.connect(lambda _i: self._restart())
        grid = QGridLayout(self)
        grid.setContentsMargins(6, 4, 6, 4)
        grid.setVerticalSpacing(1)
        grid.addWidget(self.picker, 0, 0, 1, 2)
        self.values: dict[str, QLabel] = {}
        self.names: list[QLabel] = []
        for i, (key, label) in enumerate(FIELDS, start=1):
            value = narrow_label("–")
            value.setObjectName(f"server_{key}")
            value.setAlignment(Qt.AlignmentFlag.AlignRight)
            name = narrow_label(label)
            grid.addWidget(name, i, 0)
            grid.addWidget(value, i, 1)
            self.values[key] = value
            self.names.append(name)
        self._fill()
        ctx.settings.connections_changed.connect(self._fill)
        self.timer = QTimer(self)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self.poll)
        self.timer.start()

    def detach(self) -> None:
        self.timer.stop()
        self.ctx.settings.connections_changed.disconnect(self._fill)

    def choose(self, name: str | None) -> None:
        self.picker.setCurrentIndex(max(0, self.picker.findData(name)) if name else 0)

    def _fill(self) -> None:
        current = self.picker.currentData()
        self.picker.blockSignals(True)
        self.picker.clear()
        self.picker.addItem("none (choose a connection)", None)
        for conn in self.ctx.settings.connections:
            self.picker.addItem(conn.describe(), conn.name)
        self.picker.setCurrentIndex(max(0, self.picker.findData(current)) if current else 0)
        self.picker.blockSignals(False)
        # no connection, nothing to watch: no empty section in the panel
        self.setVisible(bool(self.ctx.settings.connections))
        self._restart()

    def _restart(self) -> None:
        self.probe = None
        self.last = None
        chosen = self.picker.currentData() is not None
        for label in self.values.values():
            label.setText("–")
            label.setVisible(chosen)  # rows of dashes only once there is a server to read
        for name in self.names:
            name.setVisible(chosen)

    def poll(self) -> asyncio.Future[ServerLoad | None] | None:
        """One reading on the app's loop (skipped while hidden or while one is under way)."""
        name = self.picker.currentData()
        if name is None or self._busy or not self.isVisible():
            return None
        try:
            client = self.ctx.bridge.remotes.client(name)
        except UnknownBackend:
            return None
        if self.probe is None or self.probe.client is not client:
            self.probe = LoadProbe(client)
        self._busy = True
        return asyncio.ensure_future(self._read(self.probe))

    async def _read(self, probe: LoadProbe) -> ServerLoad | None:
        try:
            load = await probe.read()
        finally:
            self._busy = False
        if probe is not self.probe:
            return None  # another connection was chosen meanwhile
        self.last = load
        self._show(load)
        return load

    def _show(self, load: ServerLoad) -> None:
        def num(v: float | None, fmt: str = "{:.0f}") -> str:
            return "–" if v is None else fmt.format(v)

        self.values["running"].setText(num(load.running))
        self.values["waiting"].setText(num(load.waiting))
        self.values["prompt_rate"].setText(num(load.prompt_tokens_per_s, "{:.1f}"))
        self.values["gen_rate"].setText(num(load.generation_tokens_per_s, "{:.1f}"))
        source = "its /metrics" if load.source == "metrics" else "this app's requests"
        self.values["source"].setText(source)
        self.values["source"].setToolTip(load.note)
