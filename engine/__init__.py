"""BatchChat's inference engine: continuous batching on MLX. No Qt here."""

from .config import EngineConfig
from .engine import Engine
from .errors import EngineError, EngineStopped, QueueFullError, RequestRejected
from .llm_engine import TokenEvent
from .sampling_params import SamplingParams
from .sequence import Priority
from .stats import EngineStats, RequestRow, RequestStats, TickRecord
from .stream import RequestStream

__all__ = [
    "Engine", "EngineConfig", "EngineError", "EngineStats", "EngineStopped", "Priority",
    "QueueFullError", "RequestRejected", "RequestRow", "RequestStats", "RequestStream",
    "SamplingParams", "TickRecord", "TokenEvent",
]
