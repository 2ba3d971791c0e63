"""`python -m bench.embeddings`: /v1/embeddings' decoder pooling on the bundled SmolLM2-135M
(app/server/embeddings/pooled.py), on this thread, no server:

- similarity: for each pooling (mean, last token), the cosine of each text with its small
  edit or paraphrase against its highest cosine with an unrelated text;
- batch invariance: the largest difference between an input's vector in a batch of 64
  mixed-length inputs and alone;
- speed: 64 inputs as one request (grouped forwards) against one forward each.
"""

from __future__ import annotations

import time

PAIRS = [
    ("The cat sat on the mat.", "The cat sat on the rug."),
    ("How do I bake sourdough bread?", "What is the recipe for sourdough bread?"),
    ("The train to Paris leaves at nine.", "The train for Paris departs at nine."),
    ("Reset your password from the account page.", "You can change your password in the "
                                                   "account settings."),
]
UNRELATED = ["Quarterly revenue rose 4% on strong bond sales.",
             "Photosynthesis turns light into chemical energy.",
             "The goalkeeper saved a penalty in extra time.",
             "Mount Everest is the highest mountain above sea level."]


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def main() -> None:
    from app.backend.local_target import load_model
    from app.server.embeddings import pooled
    from app.server.embeddings.source import prepared

    loaded = load_model("bundled")
    model, tok = prepared(loaded.model), loaded.tokenizer  # as --embedding-model loads it
    texts = [t for p in PAIRS for t in p] + UNRELATED
    ids = [list(tok.encode(t)) for t in texts]
    for pooling in pooled.POOLINGS:
        v = dict(zip(texts, pooled.embed(model, ids, pooling=pooling), strict=True))
        for a, b in PAIRS:
            near = cos(v[a], v[b])
            far = max(cos(v[a], v[u]) for u in UNRELATED)
            print(f"{pooling:5s} {a[:34]:34s} similar {near:.3f}  unrelated max {far:.3f}"
                  f"  gap {near - far:+.3f}")
    many = [ids[i % len(ids)] * (1 + i % 4) for i in range(64)]
    t0 = time.perf_counter()
    together = pooled.embed(model, many)
    t1 = time.perf_counter()
    alone = [pooled.embed(model, [x])[0] for x in many]
    t2 = time.perf_counter()
    worst = max(abs(p - q) for x, y in zip(together, alone, strict=True)
                for p, q in zip(x, y, strict=True))
    tokens = sum(map(len, many))
    print(f"64 inputs, {tokens} tokens: one request {t1 - t0:.3f} s "
          f"({tokens / (t1 - t0):.0f} tok/s), one forward each {t2 - t1:.3f} s "
          f"({tokens / (t2 - t1):.0f} tok/s); batch vs alone max |diff| {worst:.2e}")


if __name__ == "__main__":
    main()
