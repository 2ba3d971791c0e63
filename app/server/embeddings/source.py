"""Which model answers /v1/embeddings: the one the user named for it
(ServerConfig.embedding_model, `batchchat serve --embedding-model`: "bundled", a .gguf
file or an mlx-lm directory, local files only), loaded on the forward thread at its first
request and kept; else the chat model being served, its weights shared with its engine."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...backend import local_target
from . import forward_thread

if TYPE_CHECKING:
    from ...backend import LocalTarget


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    name: str  # the id replies name
    model: Any  # an mlx-lm model (pooled.body_of takes its body)
    encode: Callable[[str], list[int]]
    context_length: int


_loaded: dict[str, EmbeddingModel] = {}  # source -> model, loaded on the forward thread
_lock = threading.Lock()


def check_source(source: str) -> None:
    """ValueError unless `source` is local ("bundled" or a path that exists): embeddings
    never fetch from the hub while serving."""
    if source != "bundled" and not Path(source).expanduser().exists():
        raise ValueError(f"the embedding model '{source}' is neither 'bundled' nor a local "
                         f"file or directory")


def name_of(source: str) -> str:
    path = Path(source)
    return "bundled" if source == "bundled" else (path.stem if path.is_file() else path.name)


async def dedicated(source: str) -> EmbeddingModel:
    """The model `source` names, loaded (once) on the forward thread: MLX evaluates a lazily
    loaded weight only on the thread that loaded it, and that thread runs its forwards."""
    check_source(source)
    return await forward_thread.run(lambda: _load(source))


def loaded(source: str) -> EmbeddingModel:
    """The model `source` names, loaded at the first call; on the forward thread only."""
    return _load(source)


def _load(source: str) -> EmbeddingModel:  # forward thread
    with _lock:
        if source not in _loaded:
            loaded = local_target.load_model(str(Path(source).expanduser())
                                             if source != "bundled" else source)
            _loaded[source] = EmbeddingModel(
                name_of(source), prepared(loaded.model),
                lambda text, t=loaded.tokenizer: list(t.encode(text)), loaded.context_length)
        return _loaded[source]


def prepared(model: Any) -> Any:
    """`model` with its quantized layers widened (mlx-lm's dequantize_model, float16) and
    every weight materialised, once: MLX's quantized matmul on the CPU took 3.2 s for one
    22-token input of the bundled model, 0.35 s dequantized; and a GGUF's weights load
    lazily, so a lazy weight would be read and converted again in every forward."""
    import mlx.core as mx  # here: importing this module loads no MLX
    from mlx_lm.utils import dequantize_model

    model = dequantize_model(model)
    mx.eval(model.parameters())
    return model


def served(target: LocalTarget, name: str) -> EmbeddingModel:
    """The chat model being served: its engine's model, read (never written) from the
    forward thread while the engine's own thread runs it."""
    return EmbeddingModel(name, target.engine.model, target.encode, target.context_length)
