"""Issue #51: an index build reports how far it has gone (what the chip's "indexing 42 %"
shows): whole percents from 0 to 100, rising, many in between on a large document, and the
index is the same one bm25s builds in one call; with an embedding model the chunks'
embedding follows as its own stage; a cached index reports nothing."""

from __future__ import annotations

import random
from collections.abc import Sequence

import bm25s
import numpy as np
from bm25s.tokenization import Tokenizer

from app.attachments.attachment import Attachment, Part
from app.attachments.chunks import chunk_attachment
from app.attachments.index import ChunkIndex, IndexCache


def _big(lines: int, seed: int = 3) -> Attachment:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(5000)]
    text = "\n".join(" ".join(rng.choices(words, k=12)) for _ in range(lines))
    return Attachment("big.txt", "text", len(text), (Part(text),))


def test_building_an_index_reports_rising_percents_and_builds_the_same_index() -> None:
    att = _big(20_000)
    chunks = chunk_attachment(att)
    seen: list[tuple[str, float]] = []
    index = ChunkIndex(chunks, lambda stage, fraction: seen.append((stage, fraction)))
    assert {s for s, _ in seen} == {"indexing"}
    fractions = [f for _, f in seen]
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert fractions == sorted(fractions) and len(set(fractions)) == len(fractions)
    middle = [f for f in fractions if 0 < f < 1]
    assert len(middle) >= 50  # whole percents, most of them seen
    assert any(f < 0.35 for f in middle) and any(f > 0.6 for f in middle)  # both phases

    # the same ranking and scores as bm25s's own one-call build
    tokenizer = Tokenizer(stopwords="en")
    ids = tokenizer.tokenize([c.text for c in chunks], return_as="ids", show_progress=False)
    plain = bm25s.BM25()
    plain.index(ids, show_progress=False)
    for query in ("w17 w4021", "w99 w100 w101", "w3"):
        q = tokenizer.tokenize([query], update_vocab=False, return_as="ids",
                               show_progress=False)
        docs, scores = plain.retrieve(q, k=10, show_progress=False, n_threads=1)
        got = index.search(query, 10)
        assert [s.order for s in got] == [int(d) for d in docs[0]][:len(got)]
        np.testing.assert_allclose([s.score for s in got], scores[0][:len(got)], rtol=1e-6)


class CountingEmbedder:
    name = "counting-8"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * 7 for _ in texts]


def test_the_cache_reports_indexing_then_embedding_and_nothing_once_cached() -> None:
    att = _big(1_000)
    cache = IndexCache(embedder=CountingEmbedder())
    seen: list[tuple[str, float]] = []
    cache.get(att, lambda stage, fraction: seen.append((stage, fraction)))
    stages = [s for s, _ in seen]
    assert stages[0] == "indexing" and stages[-1] == "embedding"
    assert stages.index("embedding") > max(i for i, s in enumerate(stages) if s == "indexing")
    assert ("indexing", 1.0) in seen and seen[-1] == ("embedding", 1.0)
    embedding = [f for s, f in seen if s == "embedding"]
    assert len(embedding) > 1 and embedding == sorted(embedding)  # batch by batch
    again: list[tuple[str, float]] = []
    cache.get(att, lambda stage, fraction: again.append((stage, fraction)))
    assert again == []
    cache.close()
