"""Issue #51: retrieval ranks an attachment's chunks by BM25 and, with an embedding model
set, by their embeddings too, the two rankings fused (reciprocal rank fusion); the vectors
are cached by chunk hash beside the BM25 index. A small embedder that knows synonyms (a
real Embedder: bag of words, synonyms mapped to one word, hashed into 256 dimensions)
shows what the fusion adds: a question worded with other words than the passage, which
BM25 cannot find. The bundled model's pooled states run through the same road once."""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from app.attachments.attachment import Attachment, Part
from app.attachments.fit import fit
from app.attachments.index import IndexCache
from app.attachments.messages import shared_cache
from app.attachments.vectors import VectorCache, reciprocal_rank_fusion
from app.bridge import EngineBridge
from app.context import AppContext
from app.settings import Settings

SYNONYMS = {"automobile": "car", "vehicle": "car", "hue": "colour", "color": "colour",
            "crimson": "red", "scarlet": "red"}


class SynonymEmbedder:
    """Words (synonyms as one) hashed into 256 dimensions, the vector normalised."""

    name = "synonyms-256"

    def __init__(self) -> None:
        self.calls: list[int] = []  # texts per call

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        out = []
        for text in texts:
            v = np.zeros(256, dtype=np.float32)
            for word in text.lower().replace("?", " ").replace(".", " ").split():
                v[zlib.crc32(SYNONYMS.get(word, word).encode()) % 256] += 1.0
            out.append((v / max(float(np.linalg.norm(v)), 1e-12)).tolist())
        return out


def document(lines: int = 120) -> Attachment:
    """`lines` lines of filler words, one of them (70 of 120) saying the car is red."""
    filler = [f"Line {i} speaks of rivers, stones and the weather of the north."
              for i in range(lines)]
    filler[lines * 7 // 12] = "My car is painted red all over."
    text = "\n".join(filler) + "\n"
    return Attachment("notes.txt", "text", len(text), (Part(text),))


def encode(text: str) -> list[int]:
    return list(text.encode())  # a byte a token: budgets in bytes


def test_reciprocal_rank_fusion_sums_the_ranks() -> None:
    fused = reciprocal_rank_fusion([[1, 2, 3], [3, 1]])
    assert [item for item, _ in fused] == [1, 3, 2]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[1][1] == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2][1] == pytest.approx(1 / 62)


def test_a_question_in_other_words_is_found_only_with_embeddings() -> None:
    question = "What hue is the automobile?"
    budget = 600  # a few chunks' worth of a 7,600-byte document
    keyword = fit(question, [document()], encode=encode, budget_tokens=budget,
                  cache=IndexCache(chunk_chars=200))
    assert not keyword.whole
    assert not any("car is painted red" in c.text for c in keyword.citations)
    embedder = SynonymEmbedder()
    fused = fit(question, [document()], encode=encode, budget_tokens=budget,
                cache=IndexCache(chunk_chars=200, embedder=embedder))
    [cited] = [c for c in fused.citations if "car is painted red" in c.text]
    assert cited.first_line <= 71 <= cited.last_line and "car is painted red" in fused.content


def test_vectors_are_cached_by_chunk_hash(monkeypatch) -> None:
    embedder = SynonymEmbedder()
    cache = IndexCache(chunk_chars=200, embedder=embedder)
    index = cache.get(document())
    chunks = len(index.chunks)
    assert index.vectors is not None and index.vectors.shape == (chunks, 256)
    assert cache.vector_cache.embedded == chunks
    assert np.allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-6)
    assert cache.get(document()) is index and cache.vector_cache.embedded == chunks
    # an edited copy (a line added at the end: another file, another index) embeds only
    # the chunks that changed
    text = document().text + "One more line about the sea.\n"
    again = cache.get(Attachment("notes-v2.txt", "text", len(text), (Part(text),)))
    assert again is not index and cache.built == 2
    new = cache.vector_cache.embedded - chunks
    assert 1 <= new <= 2
    assert np.array_equal(again.vectors[:chunks - 1], index.vectors[:chunks - 1])
    # the question's vector is cached as well
    cache.query_vector("What hue is the automobile?")
    cache.query_vector("What hue is the automobile?")
    assert cache.vector_cache.embedded == chunks + new + 1
    # a file of more chunks than EMBED_AT_MOST: BM25 alone (embedding it would take hours)
    small = IndexCache(chunk_chars=200, embedder=embedder)
    monkeypatch.setattr("app.attachments.index.EMBED_AT_MOST", chunks - 1)
    assert small.get(document()).vectors is None
    # without an embedder: BM25 alone, as before
    plain = IndexCache(chunk_chars=200)
    assert plain.query_vector("x") is None and plain.get(document()).vectors is None


def test_vectors_come_in_batches_with_progress() -> None:
    embedder = SynonymEmbedder()
    seen: list[tuple[int, int]] = []
    texts = [f"text number {i}" for i in range(70)]
    rows = VectorCache().vectors(embedder, texts, lambda done, total: seen.append((done, total)))
    assert rows.shape == (70, 256) and embedder.calls == [32, 32, 6]
    assert seen == [(32, 70), (64, 70), (70, 70)]


def test_the_app_setting_names_the_model(tmp_path, caplog) -> None:
    settings = Settings(tmp_path / "s.json")
    settings.retrieval_model = "bundled"
    settings.save()
    loaded = Settings.load(tmp_path / "s.json")
    assert loaded.retrieval_model == "bundled"
    try:
        AppContext(loaded, EngineBridge())
        assert shared_cache().embedder is not None
        assert shared_cache().embedder.name == "mean-pooled:bundled"
        loaded.retrieval_model = str(tmp_path / "no-such-model.gguf")
        with caplog.at_level(logging.WARNING):
            AppContext(loaded, EngineBridge())
        assert shared_cache().embedder is None  # BM25 alone, and said why
        assert "retrieval_model" in caplog.text and "no-such-model" in caplog.text
    finally:
        shared_cache().embedder = None


def test_the_bundled_models_pooled_states_rank_the_chunks() -> None:
    """The real embedder (the bundled SmolLM2's mean-pooled states, on the embeddings'
    forward thread) through the same fit: unit vectors of its width, and the fused
    ranking gives passages that fit the budget."""
    from app.server.embeddings.retrieval import PooledEmbedder

    # 36 lines (~2,300 bytes, 6 chunks): more than the budget, so passages are ranked and
    # fitted; each chunk is a forward of the bundled model on MLX's CPU path (~0.55 CPU-s
    # a chunk: the 120-line document's 20 took 11 of this test's 17 CPU-s)
    doc = document(36)
    embedder = PooledEmbedder("bundled")
    cache = IndexCache(chunk_chars=400, embedder=embedder)
    got = fit("What colour is my car?", [doc], encode=encode, budget_tokens=1500,
              cache=cache)
    index = cache.get(doc)
    assert len(index.vectors) >= 5  # several chunks ranked
    assert "painted red" in got.content  # the passage the question asks about is in
    assert index.vectors is not None and index.vectors.shape[1] == 576
    assert np.allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-4)
    assert not got.whole and got.citations
    assert len(got.content.encode()) <= 1500 + len("What colour is my car?") + 200


def test_files_without_text_give_their_beginning() -> None:
    """An API message of files alone (no text) is fitted too: whole, the files alone; too
    long, each file's first passages, in order, as many as fit (there is no question to
    rank by)."""
    whole = fit("", [document()], encode=encode, budget_tokens=100_000,
                cache=IndexCache(chunk_chars=200))
    assert whole.whole and "car is painted red" in whole.content
    got = fit("", [document()], encode=encode, budget_tokens=600,
              cache=IndexCache(chunk_chars=200))
    assert not got.whole and got.citations
    assert [c.first_line for c in got.citations] == sorted(c.first_line for c in got.citations)
    assert got.citations[0].first_line == 1
    lines = [c.last_line - c.first_line + 1 for c in got.citations]
    assert got.citations[-1].last_line == sum(lines)  # the beginning, no gaps
    # the tab's files-only question, and a question no passage shares a word with, the same
    from app.attachments.framing import FILES_ONLY_QUESTION

    for question in (FILES_ONLY_QUESTION, "Zyxwv?"):
        again = fit(question, [document()], encode=encode, budget_tokens=600,
                    cache=IndexCache(chunk_chars=200))
        assert again.citations == got.citations
