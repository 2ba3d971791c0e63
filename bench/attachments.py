"""`python -m bench.attachments`: retrieval for attachments that do not fit (issue #51).

Generates `--mb` MB of text (default 100): lines of Zipf-distributed pseudo-words from a
5,000-word vocabulary, with decoy facts in the planted facts' own words ("The access code
for the <name> archive is <n>.", other names) sprinkled through, and `--facts` planted
facts (default 100) at random lines. Measures:

- indexing: cutting the text into chunks (app/attachments/chunks.py, with their line
  ranges) and building the BM25 index (app/attachments/index.py, bm25s), seconds and MB/s;
- recall@5: for each planted fact, a question worded differently from the fact ("What is
  the access code of the <name> archive?"); a hit when a chunk holding the fact is among
  the 5 best; and the query time per question.
- with `--embedding-model SOURCE` ("bundled", a .gguf, an mlx-lm folder): the chunks'
  embedding time (mean-pooled decoder states, app/server/embeddings/retrieval.py) and
  recall@5 three ways on the same questions: BM25 alone, the embeddings alone (cosine) and
  both fused (reciprocal rank fusion, what retrieval does with a model set). Embedding
  runs at tens of tokens a second on a CPU, so use a small `--mb` with it (0.05: ~45
  chunks).

Single-threaded (the index is built on one worker thread in the app)."""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

from app.attachments.attachment import Attachment, Part
from app.attachments.chunks import CHUNK_CHARS, chunk_attachment
from app.attachments.index import ChunkIndex

SYLLABLES = "ka lo mi ne ru sa ti vo pe da gu ri zo fe la bi no sy ta me".split()


def _vocabulary(rng: random.Random, n: int) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def _names(rng: random.Random, n: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        name = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize() + \
            f"-{rng.randint(10, 99)}"
        if name not in taken:
            taken.add(name)
            out.append(name)
    return out


def make_corpus(mb: float, facts: int, seed: int = 0
                ) -> tuple[list[str], list[tuple[str, str, int]]]:
    """(lines, [(question, fact, line index)])."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    vocab = np.array(_vocabulary(rng, 5000))
    taken: set[str] = set()
    planted = _names(rng, facts, taken)
    decoys = _names(rng, 2000, taken)
    target = int(mb * 1024 * 1024)
    lines: list[str] = []
    size = 0
    while size < target:
        ranks = nrng.zipf(1.3, size=4096 * 12) % len(vocab)
        words = vocab[ranks]
        lengths = nrng.integers(6, 18, size=4096)
        pos = 0
        for n in lengths:
            if rng.random() < 0.01:
                line = (f"The access code for the {rng.choice(decoys)} archive is "
                        f"{rng.randint(1000, 9999)}.")
            else:
                line = " ".join(words[pos:pos + n]) + "."
                pos += n
            lines.append(line)
            size += len(line) + 1
            if size >= target:  # a small corpus stays small (embeddings are slow)
                break
    qa: list[tuple[str, str, int]] = []
    for name, where in zip(planted, rng.sample(range(len(lines)), facts), strict=True):
        fact = f"The access code for the {name} archive is {rng.randint(1000, 9999)}."
        lines[where] = fact
        qa.append((f"What is the access code of the {name} archive?", fact, where + 1))
    return lines, qa


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--facts", type=int, default=100)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--chunk-chars", type=int, default=CHUNK_CHARS)
    ap.add_argument("--embedding-model", default=None, metavar="SOURCE",
                    help="also rank by this model's pooled embeddings (small --mb)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    lines, qa = make_corpus(args.mb, args.facts)
    text = "\n".join(lines) + "\n"
    del lines
    mb = len(text.encode("utf-8")) / 1024 / 1024
    print(f"corpus: {mb:.1f} MB, {text.count(chr(10)):,} lines, generated in "
          f"{time.perf_counter() - t0:.1f} s")
    att = Attachment("corpus.txt", "text", len(text), (Part(text),))

    t0 = time.perf_counter()
    chunks = chunk_attachment(att, args.chunk_chars)
    t_chunk = time.perf_counter() - t0
    t0 = time.perf_counter()
    index = ChunkIndex(chunks)
    t_index = time.perf_counter() - t0
    total = t_chunk + t_index
    print(f"chunking: {len(chunks):,} chunks of <= {args.chunk_chars} chars in {t_chunk:.1f} s")
    print(f"BM25 index (bm25s): {t_index:.1f} s")
    print(f"indexing total: {total:.1f} s, {mb / total:.1f} MB/s")

    hits = 0
    times: list[float] = []
    for question, fact, line in qa:
        t0 = time.perf_counter()
        best = index.search(question, args.k)
        times.append(time.perf_counter() - t0)
        if any(fact in s.chunk.text and s.chunk.first_line <= line <= s.chunk.last_line
               for s in best):
            hits += 1
    print(f"recall@{args.k}: {hits}/{len(qa)} = {hits / len(qa):.2f}")
    print(f"query: median {statistics.median(times) * 1000:.1f} ms, "
          f"max {max(times) * 1000:.1f} ms")
    if args.embedding_model:
        with_embeddings(index, qa, args.k, args.embedding_model)


def with_embeddings(index: ChunkIndex, qa: list[tuple[str, str, int]], k: int,
                    source: str) -> None:
    """Recall@k by BM25, by the embeddings alone and by both fused, on the same questions."""
    from app.attachments.vectors import VectorCache
    from app.server.embeddings.retrieval import PooledEmbedder

    embedder = PooledEmbedder(source)
    t0 = time.perf_counter()
    embedder.embed(["warm up"])  # the model's load, not counted below
    print(f"embedding model {source}: loaded in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    index.vectors = VectorCache().vectors(
        embedder, [c.text for c in index.chunks],
        lambda done, total: print(f"  embedded {done}/{total} chunks", flush=True))
    index.vectors_of = embedder.name
    spent = time.perf_counter() - t0
    print(f"chunk vectors: {len(index.chunks)} chunks in {spent:.1f} s "
          f"({len(index.chunks) / spent:.2f} chunks/s)")
    hits = {"BM25": 0, "embeddings alone": 0, "BM25 + embeddings (RRF)": 0}
    times: list[float] = []
    for question, fact, line in qa:
        t0 = time.perf_counter()
        qv = np.asarray(embedder.embed([question])[0], dtype=np.float32)
        times.append(time.perf_counter() - t0)
        nearest = np.argsort(-(index.vectors @ qv), kind="stable")[:k]
        ranked = {"BM25": [s.chunk for s in index.search(question, k)],
                  "embeddings alone": [index.chunks[int(i)] for i in nearest],
                  "BM25 + embeddings (RRF)": [s.chunk for s in index.search(question, k, qv)]}
        for name, chunks in ranked.items():
            hits[name] += any(fact in c.text and c.first_line <= line <= c.last_line
                              for c in chunks)
    for name, n in hits.items():
        print(f"recall@{k} {name}: {n}/{len(qa)} = {n / len(qa):.2f}")
    print(f"question embedding: median {statistics.median(times) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
