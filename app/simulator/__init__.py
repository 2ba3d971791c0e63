"""The load simulator's Qt-free core: settings, prompt templates, a run, and its export.

Names are imported lazily: `app.simulator.workload` (the load generator, which the
benchmarks in bench/ use too) then loads without the storage and its dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SimConfig": ".config",
    "SimConfigError": ".config",
    "LoadTarget": ".run",
    "SimRow": ".run",
    "SimulationRun": ".run",
    "PromptSet": ".templates",
    "default_prompt_set": ".templates",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'app.simulator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
