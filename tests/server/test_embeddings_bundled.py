"""/v1/embeddings on the bundled SmolLM2-135M as the server's embedding model
(`embedding_model="bundled"`, beside the tiny chat model): a chat decoder, not an
embedding model, so its mean-pooled hidden states. Through the official `openai` client: a
text is closer to itself with a small edit, and a question to its paraphrase, than to
unrelated texts. This shows the vectors carry the words' overlap and topic; it is no
retrieval benchmark (docs/server.md says what a trained embedding model would add)."""

from __future__ import annotations

import pytest

from tests.server.conftest import serving

pytestmark = pytest.mark.bundled

MODEL = "smollm2"
PAIRS = [  # (text, its small edit or paraphrase)
    ("The cat sat on the mat.", "The cat sat on the rug."),
    ("How do I bake sourdough bread?", "What is the recipe for sourdough bread?"),
    ("The train to Paris leaves at nine.", "The train for Paris departs at nine."),
]
UNRELATED = ["Quarterly revenue rose 4% on strong bond sales.",
             "Photosynthesis turns light into chemical energy.",
             "The goalkeeper saved a penalty in extra time."]


@pytest.fixture
async def s(make_engine):
    async with serving(make_engine(), model="tiny", embedding_model="bundled") as served:
        yield served


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))  # unit vectors


async def test_similar_texts_are_closer_than_unrelated_ones(s):
    texts = [t for pair in PAIRS for t in pair] + UNRELATED
    r = await s.client.embeddings.create(model=MODEL, input=texts, encoding_format="float")
    v = {t: d.embedding for t, d in zip(texts, r.data, strict=True)}
    for text, similar in PAIRS:
        near = cosine(v[text], v[similar])
        others = [cosine(v[text], v[u]) for u in UNRELATED] + [
            cosine(v[text], v[p]) for p, _ in PAIRS if p != text]
        assert near > max(others), (text, near, others)
    assert r.model == "bundled" and len(r.data[0].embedding) == 576  # SmolLM2's width


async def test_a_lazily_loaded_chat_model_is_refused_with_the_way_out(loaded):
    """A GGUF's mlx-lm weights stay lazy on the thread that loaded them (its engine runs
    packed copies): the chat model cannot be pooled elsewhere, and the 400 says so."""
    import openai

    from engine import Engine

    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                    context_length=loaded.context_length)
    async with serving(engine, model=MODEL) as served:
        with pytest.raises(openai.BadRequestError) as caught:
            await served.client.embeddings.create(model=MODEL, input="hi")
    assert "--embedding-model" in caught.value.message
