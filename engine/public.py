"""The engine's names the app may use, none of which loads MLX.

Records, events, errors, sampling settings and text checks, what the loader supports
(engine/loader/support.py), plus the process set-up that must run before MLX loads. `app`
imports the engine only through here (an import-linter contract in pyproject.toml);
app.backend.local_target alone runs the Engine itself.
tests/engine/test_public.py checks that importing this module loads no MLX.
"""

from __future__ import annotations

from .config import kv_budget_from_env
from .cpu_memory import give_back_freed_memory, heap_bytes
from .cpu_options import CpuOptions, CpuOptionsError
from .determinism import describe as describe_determinism
from .errors import EngineError, EngineStopped, QueueFullError, RequestRejected
from .grammars import (
    GrammarError,
    json_object_grammar,
    json_schema_grammar,
    lark_grammar,
    regex_grammar,
)
from .kv_formula import host_available_bytes
from .loader.bundled import BUNDLED_FILENAME, model_cache_dir
from .loader.errors import ModelLoadError
from .loader.source_check import check_source
from .loader.support import (
    GGUF_FILE_TYPES,
    MemoryNeed,
    ggml_type_name,
    gguf_memory,
    gguf_refusal,
    gguf_tokenizer_unsupported,
    gguf_unsupported,
    mlx_lm_unsupported,
)
from .preload import child_environment, ensure_preloads
from .reasoning import (
    EFFORTS,
    Controls,
    Piece,
    ReasoningSplit,
    ReasoningStyle,
    budget_grammar,
    split_whole,
    starts_inside,
    style_of,
    template_kwargs,
    with_switch,
)
from .sampling_params import SamplingParams
from .sequence import Priority
from .speculation import DRAFT_PREFIX
from .stats import EngineStats, RequestProgress, RequestRow, RequestStats, TickRecord
from .stream import EventStream, RequestStream
from .text_check import lone_surrogate, repair_text
from .token_event import TokenEvent
from .units import format_bytes
from .vision.mmproj_support import is_mmproj, mmproj_beside, projector_refusal
from .vision.support import is_vision_config, vision_refusal

__all__ = [
    "EFFORTS",
    "Controls",
    "Piece",
    "ReasoningSplit",
    "ReasoningStyle",
    "budget_grammar",
    "split_whole",
    "starts_inside",
    "style_of",
    "template_kwargs",
    "with_switch",
    "check_source",
    "gguf_refusal",
    "is_mmproj",
    "is_vision_config",
    "mmproj_beside",
    "projector_refusal",
    "vision_refusal",
    "DRAFT_PREFIX",
    "BUNDLED_FILENAME",
    "CpuOptions",
    "CpuOptionsError",
    "EngineError",
    "EngineStats",
    "EngineStopped",
    "EventStream",
    "GrammarError",
    "ModelLoadError",
    "Priority",
    "QueueFullError",
    "RequestProgress",
    "RequestRejected",
    "RequestRow",
    "RequestStats",
    "RequestStream",
    "SamplingParams",
    "TickRecord",
    "TokenEvent",
    "describe_determinism",
    "child_environment",
    "ensure_preloads",
    "format_bytes",
    "ggml_type_name",
    "gguf_unsupported",
    "gguf_memory",
    "host_available_bytes",
    "give_back_freed_memory",
    "heap_bytes",
    "GGUF_FILE_TYPES",
    "gguf_tokenizer_unsupported",
    "MemoryNeed",
    "json_object_grammar",
    "json_schema_grammar",
    "kv_budget_from_env",
    "lark_grammar",
    "lone_surrogate",
    "mlx_lm_unsupported",
    "model_cache_dir",
    "regex_grammar",
    "repair_text",
]
