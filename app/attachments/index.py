"""Retrieval over an attachment's chunks: BM25 by bm25s (numpy only, no model to download,
indexes millions of words in seconds), and, when an embedding model is set
(`IndexCache.embedder`), the chunks' embedding vectors beside it, the two rankings joined
by reciprocal rank fusion (vectors.py). An index is built once per file content (its
sha256) and chunk size and kept in a small cache, the vectors cached by chunk hash, so a
follow-up on the same document does not index or embed it again; `IndexCache.build` runs
the work on a thread of its own, so the UI thread and the server's event loop never wait
on it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .attachment import Attachment
from .chunks import CHUNK_CHARS, Chunk, chunk_attachment
from .index_progress import STEPS, TOKENIZE_SHARE, CountedDocs, IndexProgress, Reporter
from .vectors import Embedder, VectorCache, reciprocal_rank_fusion

FUSED_DEPTH = 50  # how deep each ranking goes into the fusion
# Files of more chunks are ranked by BM25 alone: a decoder's forward on the CPU embeds
# ~0.1-1 chunk a second (bench.attachments), so 512 chunks (~600 KB of text) is already
# minutes; a 100 MB file would be days
EMBED_AT_MOST = 512


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    chunk: Chunk
    score: float
    order: int  # the chunk's place in its attachment (document order)


class ChunkIndex:
    """One attachment's chunks, their BM25 index and (with an embedding model) their
    vectors, `vectors_of` naming the model. `progress("indexing", fraction)` as the BM25
    index is built (index_progress.py)."""

    def __init__(self, chunks: Sequence[Chunk],
                 progress: IndexProgress | None = None) -> None:
        # bm25s imports scipy: loaded with the first index, not with every process that
        # could read files (`batchchat serve`, the simulator: ~1-3 s a start)
        import bm25s
        from bm25s.tokenization import Tokenizer

        self.chunks = list(chunks)
        self._tokenizer = Tokenizer(stopwords="en")
        report = Reporter(progress)
        report(0.0)
        every = max(1, len(self.chunks) // STEPS)
        ids = []
        # streamed one chunk at a time (the same ids as one call: the vocabulary grows in
        # order), so the tokenizing reports its progress
        for i, doc in enumerate(self._tokenizer.tokenize(
                [c.text for c in self.chunks], update_vocab=True, return_as="stream")):
            ids.append(doc)
            if (i + 1) % every == 0:
                report(TOKENIZE_SHARE * (i + 1) / len(self.chunks))
        self._bm25 = bm25s.BM25()
        self._bm25.index(CountedDocs(ids, report), show_progress=False)
        report(1.0)
        self.vectors: np.ndarray | None = None  # (chunks, width) unit rows
        self.vectors_of = ""

    def search(self, query: str, k: int,
               query_vector: np.ndarray | None = None) -> list[ScoredChunk]:
        """The k best chunks for `query`, best first: by BM25 (chunks scoring 0 left out),
        or, given the query's vector and the chunks' (of the same model), by the fusion of
        the BM25 and the cosine rankings (its score the fused one)."""
        if not self.chunks:
            return []
        dense = query_vector is not None and self.vectors is not None \
            and len(self.vectors) == len(self.chunks)
        keyword = self._keyword(query, max(k, FUSED_DEPTH) if dense else k)
        if not dense:
            return keyword
        similarity = self.vectors @ np.asarray(query_vector, dtype=np.float32)
        nearest = np.argsort(-similarity, kind="stable")[:max(k, FUSED_DEPTH)]
        fused = reciprocal_rank_fusion([[s.order for s in keyword],
                                        [int(i) for i in nearest]])
        return [ScoredChunk(self.chunks[i], score, i) for i, score in fused[:k]]

    def _keyword(self, query: str, k: int) -> list[ScoredChunk]:
        q = self._tokenizer.tokenize([query], update_vocab=False, return_as="ids",
                                     show_progress=False)
        docs, scores = self._bm25.retrieve(q, k=min(k, len(self.chunks)),
                                           show_progress=False, n_threads=1)
        return [ScoredChunk(self.chunks[int(d)], float(s), int(d))
                for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


class IndexCache:
    """Indexes by (content hash, chunk size), the `size` most recent kept. `embedder`: the
    embedding model retrieval uses beside BM25 (None: BM25 alone); set it from the server's
    `--embedding-model` or the app's setting."""

    def __init__(self, size: int = 16, chunk_chars: int = CHUNK_CHARS,
                 embedder: Embedder | None = None) -> None:
        self._size = size
        self._chunk_chars = chunk_chars
        self._lock = threading.Lock()
        self._indexes: OrderedDict[tuple[str, int], ChunkIndex] = OrderedDict()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attachment-index")
        self.embedder = embedder
        self.vector_cache = VectorCache()
        self.built = 0  # indexes built (not found in the cache): what tests count

    def get(self, att: Attachment, progress: IndexProgress | None = None) -> ChunkIndex:
        """The attachment's index, built here if not cached, with its chunks' vectors when
        an embedder is set (call it off the UI thread); `progress(stage, fraction)`:
        "indexing" as BM25's index is built, then "embedding" as the chunks are embedded
        (neither when cached)."""
        key = (att.content_hash(), self._chunk_chars)
        with self._lock:
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
        if index is None:
            index = ChunkIndex(chunk_attachment(att, self._chunk_chars), progress)
            with self._lock:
                self.built += 1
                self._indexes[key] = index
                while len(self._indexes) > self._size:
                    self._indexes.popitem(last=False)
        embedder = self.embedder
        if embedder is not None and index.vectors_of != embedder.name \
                and len(index.chunks) <= EMBED_AT_MOST:
            embedded = None if progress is None else \
                (lambda done, total: progress("embedding", done / max(1, total)))
            index.vectors = self.vector_cache.vectors(
                embedder, [c.text for c in index.chunks], embedded)
            index.vectors_of = embedder.name
        return index

    def query_vector(self, text: str) -> np.ndarray | None:
        """The question's vector (cached as the chunks' are); None without an embedder."""
        embedder = self.embedder
        if embedder is None:
            return None
        return self.vector_cache.vectors(embedder, [text])[0]

    def build(self, attachments: Sequence[Attachment],
              progress: Callable[[int, int], None] | None = None
              ) -> Future[list[ChunkIndex]]:
        """The attachments' indexes, built on the cache's own thread; `progress(done,
        total)` is called there after each."""

        def run() -> list[ChunkIndex]:
            out = []
            for i, att in enumerate(attachments):
                out.append(self.get(att))
                if progress is not None:
                    progress(i + 1, len(attachments))
            return out

        return self._pool.submit(run)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
