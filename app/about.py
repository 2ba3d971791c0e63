"""What the About box says: version, model, compute device, where data lives."""

from __future__ import annotations

import importlib.metadata
import sys

from engine.public import CpuOptions
from engine.public import describe_determinism as same_answer

from .bridge import EngineBridge
from .paths import data_dir


def version() -> str:
    try:
        return importlib.metadata.version("batchchat")
    except importlib.metadata.PackageNotFoundError:
        return "development copy"


def mlx_device() -> str:
    """MLX's default device, once the engine (hence mlx) is loaded; never loads it."""
    mx = sys.modules.get("mlx.core")
    if mx is None:
        return "not loaded yet"
    return str(mx.default_device())


def about_facts(bridge: EngineBridge) -> list[tuple[str, str]]:
    return [("Version", version()),
            ("Model", bridge.description or bridge.source or "none loaded"),
            ("MLX device", mlx_device()),
            ("Same answer", same_answer(_cpu_options(bridge))),
            ("Data directory", str(data_dir()))]


def _cpu_options(bridge: EngineBridge) -> CpuOptions:
    """The loaded engine's CPU options (the defaults before one is loaded)."""
    local = bridge.local
    return local.cpu if local is not None else CpuOptions()
