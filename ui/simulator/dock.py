"""The load simulator's dock (View → Load simulator, Ctrl+Shift+L). Its panel is built on
first show, so pyqtgraph and the form cost nothing until the simulator is opened."""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QDockWidget, QWidget

from app.context import AppContext

from ..reflow import scrolled

log = logging.getLogger(__name__)
DOCK_MIN_WIDTH = 200  # as the stats dock: chat, settings panel and dock fit in 900 px


class SimulatorDock(QDockWidget):
    """`run_finished()` relays the panel's (the history view refreshes on it)."""

    run_finished = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__("Load simulator", parent)
        self.setObjectName("simulatorDock")
        self.setAllowedAreas(Qt.DockWidgetArea.AllDockWidgetAreas)
        self.ctx = ctx
        self.panel = None  # SimulatorPanel once shown

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self.panel is None:
            from .panel import SimulatorPanel  # pyqtgraph loads with the first panel

            self.panel = SimulatorPanel(self.ctx)
            self.panel.run_finished.connect(self.run_finished)
            self.setWidget(scrolled(self.panel, DOCK_MIN_WIDTH))

    async def shutdown(self, timeout: float = 3.0) -> None:
        """Stop a running simulation and wait for it; never raises (closing goes on)."""
        if self.panel is None:
            return
        try:
            await self.panel.shutdown(timeout)
        except Exception:  # noqa: BLE001 - the engine must still be shut down after this
            log.exception("stopping the simulation failed")
