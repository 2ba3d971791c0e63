"""Keyword retrieval over an attachment's chunks: BM25 by bm25s (numpy only, no model to
download, indexes millions of words in seconds). An index is built once per file content
(its sha256) and chunk size and kept in a small cache, so a follow-up on the same document
does not index it again; `IndexCache.build` runs the work on a thread of its own, so the
UI thread and the server's event loop never wait on it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import bm25s
from bm25s.tokenization import Tokenizer

from .attachment import Attachment
from .chunks import CHUNK_CHARS, Chunk, chunk_attachment


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    chunk: Chunk
    score: float
    order: int  # the chunk's place in its attachment (document order)


class ChunkIndex:
    """One attachment's chunks and their BM25 index."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = list(chunks)
        self._tokenizer = Tokenizer(stopwords="en")
        ids = self._tokenizer.tokenize([c.text for c in self.chunks], return_as="ids",
                                       show_progress=False)
        self._bm25 = bm25s.BM25()
        self._bm25.index(ids, show_progress=False)

    def search(self, query: str, k: int) -> list[ScoredChunk]:
        """The k best chunks for `query`, best first (chunks scoring 0 left out)."""
        if not self.chunks:
            return []
        q = self._tokenizer.tokenize([query], update_vocab=False, return_as="ids",
                                     show_progress=False)
        docs, scores = self._bm25.retrieve(q, k=min(k, len(self.chunks)),
                                           show_progress=False, n_threads=1)
        return [ScoredChunk(self.chunks[int(d)], float(s), int(d))
                for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


class IndexCache:
    """Indexes by (content hash, chunk size), the `size` most recent kept."""

    def __init__(self, size: int = 16, chunk_chars: int = CHUNK_CHARS) -> None:
        self._size = size
        self._chunk_chars = chunk_chars
        self._lock = threading.Lock()
        self._indexes: OrderedDict[tuple[str, int], ChunkIndex] = OrderedDict()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attachment-index")
        self.built = 0  # indexes built (not found in the cache): what tests count

    def get(self, att: Attachment) -> ChunkIndex:
        """The attachment's index, built here if not cached (call it off the UI thread)."""
        key = (att.content_hash(), self._chunk_chars)
        with self._lock:
            if key in self._indexes:
                self._indexes.move_to_end(key)
                return self._indexes[key]
        index = ChunkIndex(chunk_attachment(att, self._chunk_chars))
        with self._lock:
            self.built += 1
            self._indexes[key] = index
            while len(self._indexes) > self._size:
                self._indexes.popitem(last=False)
        return index

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
