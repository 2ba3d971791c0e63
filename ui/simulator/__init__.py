"""The load simulator panel (issue 6): the Qt view of app.simulator's SimulationRun."""

from .dock import SimulatorDock

__all__ = ["SimulatorDock"]
