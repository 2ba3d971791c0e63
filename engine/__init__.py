"""BatchChat's inference engine: continuous batching on MLX. No Qt here.

Names are imported lazily, so `engine.blas` and `engine.loader` can run before MLX loads
(the OpenBLAS re-exec then costs no heavy import twice). The app uses `engine.public` (the
mlx-free names) and, in app/backend/local_target.py alone, `Engine` and `EngineConfig`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Engine": ".engine",
    "EngineConfig": ".config",
    "CpuOptions": ".cpu_options",
    "EngineError": ".errors",
    "EngineStopped": ".errors",
    "QueueFullError": ".errors",
    "RequestRejected": ".errors",
    "TokenEvent": ".token_event",
    "SamplingParams": ".sampling_params",
    "Priority": ".sequence",
    "EngineStats": ".stats",
    "RequestRow": ".stats",
    "RequestProgress": ".stats",
    "RequestStats": ".stats",
    "TickRecord": ".stats",
    "RequestStream": ".stream",
    "tool_chat_tokens": ".tool_template",
    "prompt_text": ".chat_prompt",  # where a reasoning model's reply starts (engine/reasoning)
    "tool_support": ".tool_template",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
