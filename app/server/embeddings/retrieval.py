"""The embedding model attachment retrieval uses beside BM25 (issue #51): a decoder's
mean-pooled states (pooled.py), the model `batchchat serve --embedding-model` or the app's
setting names (source.py: "bundled", a .gguf or an mlx-lm directory, local files only),
loaded once and run on the embeddings' forward thread, as /v1/embeddings' are.

`use_for_retrieval(source)` sets it on the process's index cache (app/attachments/
messages.py shared_cache), which the tabs and the API's file parts share; None: BM25 alone."""

from __future__ import annotations

from collections.abc import Sequence

from ...attachments.messages import shared_cache
from . import forward_thread, pooled
from .source import check_source, loaded


class PooledEmbedder:
    """app/attachments/vectors.py's Embedder over a decoder's mean-pooled states."""

    def __init__(self, source: str) -> None:
        check_source(source)  # ValueError: neither "bundled" nor a local file
        self.source = source
        self.name = f"mean-pooled:{source}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        def job() -> list[list[float]]:  # forward thread
            model = loaded(self.source)
            ids = [model.encode(t)[:model.context_length] or [0] for t in texts]
            return pooled.embed(model.model, ids)

        return forward_thread.call(job)


def use_for_retrieval(source: str | None) -> PooledEmbedder | None:
    """Retrieval ranks by BM25 and the model `source` names together from now on (None or
    "": BM25 alone); the embedder set. ValueError for a source that is not local."""
    embedder = PooledEmbedder(source) if source else None
    shared_cache().embedder = embedder  # indexes get this model's vectors at their next use
    return embedder
