"""How far an index build has gone, as a fraction a chip can show (issue #51: indexing
runs off the UI thread "with progress"). bm25s reports its own progress only to tqdm, so
the work is counted from outside: the chunks tokenized one by one, then the chunks bm25s
reads as it indexes (`CountedDocs`: it walks the token ids INDEX_PASSES times: the
vocabulary, the lengths, the document frequencies, the scores). The two phases are weighed
by their measured time (a 7.7 MB text: tokenizing 1.8 s, indexing 3.2 s)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

# (stage, fraction done 0..1): "indexing" (BM25), then "embedding" with a model set
IndexProgress = Callable[[str, float], None]

TOKENIZE_SHARE = 0.35  # of the BM25 build's time
INDEX_PASSES = 4  # bm25s 0.3's walks over the corpus in BM25.index; more only stops at 99 %
STEPS = 100  # reports per phase at most: the UI shows whole percents


class Reporter:
    """Calls `progress("indexing", fraction)` when the whole percent changes."""

    def __init__(self, progress: IndexProgress | None) -> None:
        self._progress = progress
        self._last = -1

    def __call__(self, fraction: float) -> None:
        percent = int(min(1.0, max(0.0, fraction)) * 100)
        if self._progress is not None and percent > self._last:
            self._last = percent
            self._progress("indexing", percent / 100)


class CountedDocs(list[Any]):
    """The chunks' token ids, counting the documents bm25s has read across its passes."""

    def __init__(self, ids: list[Any], report: Callable[[float], None]) -> None:
        super().__init__(ids)
        self._report = report
        self._read = 0
        self._every = max(1, len(ids) * INDEX_PASSES // STEPS)

    def __iter__(self) -> Iterator[Any]:
        total = max(1, len(self) * INDEX_PASSES)
        for doc in super().__iter__():
            self._read += 1
            if self._read % self._every == 0:
                # never 100 % here: the sparse matrix is still to build after the passes
                self._report(TOKENIZE_SHARE + (1 - TOKENIZE_SHARE)
                             * min(0.99, self._read / total))
            yield doc
