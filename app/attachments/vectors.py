"""Embedding vectors for retrieval (issue #51): an `Embedder` (any model that turns texts
into unit vectors; the served one is app/server/embeddings/retrieval.py's) and the vectors
it made, cached by (embedder, sha256 of the text), so a chunk seen before (the same file
again, a follow-up, another chat attaching it) is never embedded twice. Qt-free, numpy."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

BATCH = 32  # texts per embed call: progress between calls, a bounded forward


class Embedder(Protocol):
    name: str  # which model: vectors of two models never mix

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order; blocking (never on the UI thread)."""
        ...


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class VectorCache:
    """Vectors by (embedder name, text hash), the `size` most recently used kept."""

    def __init__(self, size: int = 200_000) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self.embedded = 0  # texts embedded (not found in the cache): what tests count

    def vectors(self, embedder: Embedder, texts: Sequence[str],
                progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """(len(texts), width) float32 unit rows; the texts not cached are embedded,
        BATCH at a time, `progress(done, total)` after each batch."""
        keys = [(embedder.name, text_key(t)) for t in texts]
        with self._lock:
            found = {k: self._vectors[k] for k in keys if k in self._vectors}
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        texts_of = dict(zip(keys, texts, strict=True))
        for start in range(0, len(missing), BATCH):
            part = missing[start:start + BATCH]
            made = embedder.embed([texts_of[k] for k in part])
            for k, v in zip(part, made, strict=True):
                found[k] = np.asarray(v, dtype=np.float32)
            with self._lock:
                self.embedded += len(part)
                for k in part:
                    self._vectors[k] = found[k]
                while len(self._vectors) > self._size:
                    self._vectors.popitem(last=False)
            if progress is not None:
                progress(start + len(part), len(missing))
        with self._lock:
            for k in keys:
                if k in self._vectors:
                    self._vectors.move_to_end(k)
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys])


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], k: int = 60
                           ) -> list[tuple[int, float]]:
    """Items of several best-first rankings by the sum of 1 / (k + rank) over the rankings
    that hold them (Cormack, Clarke and Buettcher 2009; k = 60 as there): ranks, not
    scores, so BM25's unbounded scores and cosine similarities need no common scale."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda t: (-t[1], t[0]))
