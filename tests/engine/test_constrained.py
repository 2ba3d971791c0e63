"""Issue #30, engine level: a request with a grammar gets output that matches it, per row,
inside the continuous batch; rows without one keep their exact tokens.

On a tiny random-weight llama quantized as the bundled model is (the native kernels: its
answers do not depend on the batch, docs/determinism.md), whose text without a grammar is
byte noise: every reply with a grammar must still parse and validate. JSON schemas (required
fields, enums, integers, nested arrays), a Lark grammar and a regex, greedy and seeded; a
mixed batch against runs without grammars and alone; the prefix cache, share_prompt_with,
stop strings, log-probabilities, refusal, a matcher error, cancellation; one bundled case.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from engine import Engine, EngineConfig, RequestRejected, SamplingParams, testing
from engine.grammars import json_schema_grammar, lark_grammar, regex_grammar
from tests.engine.conftest import engine_on, prompts, quantized_tiny, run_to_end

pytestmark = pytest.mark.usefixtures("native_built")

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "colour": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "maxItems": 3,
                 "items": {"type": "array", "maxItems": 2,
                           "items": {"type": "integer", "minimum": -9, "maximum": 99}}},
        "home": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
                 "required": ["city"], "additionalProperties": False},
    },
    "required": ["name", "age", "colour", "tags", "home"],
    "additionalProperties": False,
}
LARK = """
start: greeting " " name "!"
greeting: "hello" | "hi" | "hey"
name: /[A-Z][a-z]{1,8}/
"""
EMAIL = r"[a-z]{2,8}@[a-z]{2,6}\.(com|org)"


@pytest.fixture(scope="module")
def qtiny():
    return quantized_tiny(seed=7)


class Reply:
    """A submitted request's events, collected as they come."""

    def __init__(self, engine: Engine, prompt: list[int], params: SamplingParams,
                 **submit: Any) -> None:
        self.stream = engine.submit(prompt_tokens=prompt, params=params, **submit)
        self.events: list[Any] = []
        self.stream.listen(self.events.append)

    @property
    def tokens(self) -> list[int]:
        return [e.token for e in self.events if e.token is not None]

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events)

    @property
    def finish(self) -> str | None:
        return self.events[-1].finish_reason if self.events else None


def person(**kw: Any) -> SamplingParams:
    return SamplingParams(max_tokens=kw.pop("max_tokens", 200),
                          grammar=json_schema_grammar(PERSON), **kw)


def seeded(seed: int, **kw: Any) -> dict[str, Any]:
    return {"temperature": 0.9, "top_p": 0.95, "seed": seed, **kw}


def alone(tiny, prompt: list[int], params: SamplingParams) -> list[int]:
    engine = engine_on(tiny)
    reply = Reply(engine, prompt, params)
    run_to_end(engine)
    return reply.tokens


# -- output matches its grammar ----------------------------------------------------------


@pytest.mark.parametrize("sampling", [{}, seeded(1), seeded(2), seeded(3)],
                         ids=["greedy", "seed1", "seed2", "seed3"])
def test_json_schema_replies_validate(qtiny, sampling) -> None:
    engine = engine_on(qtiny, max_concurrent=8)
    replies = [Reply(engine, p, person(**sampling)) for p in prompts(6, seed=3)]
    run_to_end(engine)
    for r in replies:
        assert r.finish == "stop", r.events[-1].error
        jsonschema.validate(json.loads(r.text), PERSON)


@pytest.mark.parametrize("sampling", [{}, seeded(5)], ids=["greedy", "seeded"])
def test_lark_and_regex_replies_match(qtiny, sampling) -> None:
    engine = engine_on(qtiny, max_concurrent=8)
    lark = [Reply(engine, p, SamplingParams(max_tokens=60, grammar=lark_grammar(LARK),
                                            **sampling)) for p in prompts(3, seed=4)]
    regex = [Reply(engine, p, SamplingParams(max_tokens=60, grammar=regex_grammar(EMAIL),
                                             **sampling)) for p in prompts(3, seed=5)]
    run_to_end(engine)
    for r in lark:
        assert r.finish == "stop" and re.fullmatch(r"(hello|hi|hey) [A-Z][a-z]{1,8}!", r.text)
    for r in regex:
        assert r.finish == "stop" and re.fullmatch(EMAIL, r.text), r.text


def test_json_object_is_an_object(qtiny) -> None:
    from engine.grammars import json_object_grammar

    engine = engine_on(qtiny)
    r = Reply(engine, [5, 6, 7], SamplingParams(max_tokens=300, grammar=json_object_grammar(),
                                                **seeded(9)))
    run_to_end(engine)
    if r.finish == "stop":  # free keys and values may run to the limit
        assert isinstance(json.loads(r.text), dict)
    else:
        assert r.finish == "length" and r.text.startswith("{")


def test_end_token_only_where_the_grammar_accepts(tiny) -> None:
    """The model's end token ends a row only once the grammar is complete: a regex of
    a's that may stop after three takes no end token before them."""
    eos = sorted(tiny.eos_token_ids)
    engine = Engine(tiny.model, tiny.tokenizer, eos_token_ids=eos,
                    context_length=tiny.context_length, config=EngineConfig())
    replies = [Reply(engine, p, SamplingParams(max_tokens=40, grammar=regex_grammar("a{3,30}"),
                                               **seeded(i))) for i, p in
               enumerate(prompts(6, seed=8))]
    run_to_end(engine)
    for r in replies:
        assert r.finish in ("stop", "length") and re.fullmatch("a{3,30}", r.text), r.text
        if r.finish == "stop" and len(r.text) < 30:
            assert r.tokens[-1] in eos  # ended by the model's end token, shown as no text


# -- the batch: free rows untouched, constrained rows as alone ---------------------------


def test_mixed_batch_leaves_free_rows_exact(qtiny) -> None:
    """8 rows with a grammar among 8 without: the free rows' tokens are exactly those of
    the same run without grammars, and of each alone; each constrained row's tokens are
    those of it alone (same seed)."""
    ps = prompts(16, seed=11)
    free = [SamplingParams(max_tokens=24, **(seeded(i) if i % 2 else {})) for i in range(8)]
    held = [person(**(seeded(100 + i) if i % 2 else {})) for i in range(8)]

    def run(constrained: bool) -> list[Reply]:
        engine = engine_on(qtiny, max_concurrent=16)
        replies = []
        for i in range(8):
            replies.append(Reply(engine, ps[2 * i], free[i]))
            other = held[i] if constrained else SamplingParams(max_tokens=24)
            replies.append(Reply(engine, ps[2 * i + 1], other))
        run_to_end(engine)
        return replies

    mixed, plain = run(True), run(False)
    for i in range(8):
        assert mixed[2 * i].tokens == plain[2 * i].tokens
        assert mixed[2 * i].tokens == alone(qtiny, ps[2 * i], free[i])
        jsonschema.validate(json.loads(mixed[2 * i + 1].text), PERSON)
        assert mixed[2 * i + 1].tokens == alone(qtiny, ps[2 * i + 1], held[i])


def test_prefix_cache_hit_gives_the_same_constrained_reply(qtiny) -> None:
    prompt = prompts(1, seed=13)[0] * 3
    engine = engine_on(qtiny)
    first = Reply(engine, prompt, person(**seeded(21)))
    run_to_end(engine)
    again = Reply(engine, prompt, person(**seeded(21)))
    run_to_end(engine)
    assert again.events[-1].stats.cached_tokens > 0
    assert again.tokens == first.tokens
    jsonschema.validate(json.loads(again.text), PERSON)


def test_several_answers_share_a_prompt_each_with_its_matcher(qtiny) -> None:
    prompt = prompts(1, seed=14)[0] * 2
    engine = engine_on(qtiny, max_concurrent=8)
    lead = Reply(engine, prompt, person(**seeded(30)))
    rest = [Reply(engine, prompt, person(**seeded(31 + i)),
                  share_prompt_with=lead.stream.request_id) for i in range(3)]
    run_to_end(engine)
    for i, r in enumerate([lead, *rest]):
        jsonschema.validate(json.loads(r.text), PERSON)
        assert r.tokens == alone(qtiny, prompt, person(**seeded(30 + i)))
    assert any(r.events[-1].stats.cached_tokens > 0 for r in rest)


@pytest.mark.parametrize("rows", [1, 4], ids=["solo", "batch"])
def test_run_ahead_masks_the_started_step(qtiny, monkeypatch, rows) -> None:
    """The step started ahead (a lone row's; a batch's with batch_run_ahead) draws before
    this step's token is delivered: the matchers take it early and mask the started step.
    Its replies are the same as without any run-ahead, and it did run ahead."""
    from engine.decode_batch import DecodeBatch

    ps = prompts(rows, seed=15)
    params = [person(**(seeded(40 + i) if i % 2 else {})) if i != 1 else
              SamplingParams(max_tokens=30, **seeded(7)) for i in range(rows)]

    def run() -> tuple[list[list[int]], int]:
        engine = engine_on(qtiny, max_concurrent=8, batch_run_ahead=True)
        replies = [Reply(engine, p, q) for p, q in zip(ps, params, strict=True)]
        used = 0
        while engine.has_work():
            engine.step()
            used += testing.facts(engine).running_ahead
        return [r.tokens for r in replies], used

    ahead, used = run()
    assert used > 10
    monkeypatch.setattr(DecodeBatch, "_may_run_ahead", lambda self, seqs: False)
    plain, none = run()
    assert none == 0
    assert ahead == plain
    for i, tokens in enumerate(ahead):
        if params[i].grammar is not None:
            jsonschema.validate(json.loads(qtiny.tokenizer.decode(tokens)), PERSON)


# -- the mask itself -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("width", [259, 256, 250, 288, 300], ids=lambda w: f"width{w}")
def test_mask_is_the_grammar_bits_and_free_rows_keep_theirs(dtype, width) -> None:
    """mask_logits over a batch: a constrained row's tokens outside the grammar's mask (and
    past the tokenizer's vocabulary, 259 here) exactly -inf, its others bit for bit as they
    were; a row without a grammar bit for bit as it was (-0.0, inf and NaN included). Logits
    as wide as the vocabulary (259: a partial last word of the mask), narrower, wider."""
    import mlx.core as mx
    import numpy as np

    from engine.constraint import GrammarTokenizer, mask_logits
    from tests.tiny_model import make_tokenizer

    tok = GrammarTokenizer(make_tokenizer(), [])
    matchers = [tok.matcher(json_schema_grammar(PERSON)) if i in (1, 2, 4) else None
                for i in range(6)]
    rng = np.random.default_rng(width)
    for _ in range(12):
        values = rng.normal(size=(6, width)).astype(np.float32)
        values[0, :4] = [-0.0, np.inf, -np.inf, np.nan]
        logits = mx.array(values).astype(getattr(mx, dtype))
        raw = np.array(logits.view(mx.uint16 if dtype != "float32" else mx.uint32))
        got = np.array(mask_logits(matchers, logits).view(
            mx.uint16 if dtype != "float32" else mx.uint32))
        neg_inf = np.array(mx.array([-np.inf], getattr(mx, dtype)).view(
            mx.uint16 if dtype != "float32" else mx.uint32))[0]
        for i, m in enumerate(matchers):
            if m is None:
                assert np.array_equal(got[i], raw[i])
                continue
            bits = np.frombuffer(m.matcher.compute_bitmask(), dtype=np.uint8)
            allowed = np.zeros(width, dtype=bool)
            take = min(width, m.vocab)
            allowed[:take] = np.unpackbits(bits, bitorder="little")[:take]
            assert allowed.any() and not allowed.all()
            assert np.array_equal(got[i], np.where(allowed, raw[i], neg_inf))
            masked = np.where(allowed, values[i], -np.inf)
            assert m.consume(int(masked.argmax())) is None


# -- stop strings, log-probabilities, refusal, errors, cancel ------------------------------


def test_stop_string_ends_a_constrained_row(qtiny) -> None:
    engine = engine_on(qtiny)
    full = Reply(engine, [9, 9], person())
    run_to_end(engine)
    cut = Reply(engine, [9, 9], SamplingParams(max_tokens=200, stop=(",",),
                                               grammar=json_schema_grammar(PERSON)))
    run_to_end(engine)
    assert cut.finish == "stop"
    assert cut.text == full.text.split(",")[0]


def test_logprobs_are_the_masked_distribution(qtiny) -> None:
    """A compact JSON object must begin with '{': with one byte a token, the only allowed
    first token has log-probability 0 and no alternative; later tokens' alternatives are
    all tokens the grammar allowed, their probabilities summing to at most 1."""
    engine = engine_on(qtiny)
    r = Reply(engine, [3, 4, 5], SamplingParams(max_tokens=200, logprobs=5,
                                               grammar=json_schema_grammar(PERSON)))
    run_to_end(engine)
    first = r.events[0]
    assert r.text.startswith("{")
    assert first.logprob == 0.0 and [t for t, _ in first.top_logprobs] == [first.token]
    for e in r.events:
        if e.token is None:
            continue
        assert e.logprob is not None and e.logprob <= 0.0
        assert all(v > float("-inf") for _, v in e.top_logprobs)
        assert sum(2.718281828 ** v for _, v in e.top_logprobs) <= 1.0 + 1e-5


def test_grammar_this_tokenizer_cannot_use_is_refused(qtiny) -> None:
    engine = engine_on(qtiny)
    # token 300 is past the tiny vocabulary (259): fine as text, not for this model
    bad = lark_grammar('start: "a" <[300]>')
    with pytest.raises(RequestRejected, match="grammar"):
        engine.submit(prompt_tokens=[1, 2], params=SamplingParams(grammar=bad))
    with pytest.raises(RequestRejected, match="grammar"):
        engine.submit(prompt_tokens=[1, 2], params={"grammar": "start: ((("})
    assert not engine.has_work()


def test_matcher_error_ends_the_row_with_an_error(qtiny, monkeypatch) -> None:
    """A token the grammar refuses (here: the mask left off for one step) ends the row
    with finish_reason "error" naming the grammar, never free text after it; the free
    row beside it goes on."""
    from engine import next_token

    engine = engine_on(qtiny)
    held = Reply(engine, [1, 2, 3], SamplingParams(max_tokens=50,
                                                    grammar=regex_grammar("a{40}")))
    free = Reply(engine, [4, 5, 6], SamplingParams(max_tokens=10))
    engine.step()
    engine.step()
    monkeypatch.setattr(next_token, "mask_logits", lambda matchers, logits, *drafts: logits)
    engine.step()
    monkeypatch.undo()
    run_to_end(engine)
    assert held.finish == "error"
    assert held.events[-1].error.startswith("grammar")
    assert re.fullmatch("a*", held.text)
    assert free.finish == "length" and len(free.tokens) == 10


def test_cancel_mid_way(qtiny) -> None:
    engine = engine_on(qtiny, max_concurrent=4)
    held = Reply(engine, [1, 2, 3], person(max_tokens=200))
    other = Reply(engine, [2, 3, 4], person(max_tokens=200))
    for _ in range(4):
        engine.step()
    engine.cancel(held.stream.request_id)
    run_to_end(engine)
    assert held.finish == "cancelled"
    assert 0 < len(held.tokens) < 200
    jsonschema.validate(json.loads(other.text), PERSON)


# -- the bundled model --------------------------------------------------------------------


@pytest.mark.bundled
def test_bundled_model_json_schema_reply_validates() -> None:
    """SmolLM2 (135M) asked for a person: three replies with the schema (greedy, two
    seeds) validate; a free reply beside them has exactly its tokens alone."""
    from engine.loader import load_model

    loaded = load_model("bundled")

    def engine() -> Engine:
        return Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                      context_length=loaded.context_length, config=EngineConfig())

    chat = [{"role": "user", "content": "Describe a person as JSON: name, age, favourite "
                                        "colour, some tag numbers and their home city."}]
    free_params = SamplingParams(max_tokens=20, **seeded(4))

    def collect(e: Engine, params: SamplingParams) -> list[Any]:
        events: list[Any] = []
        e.submit(messages=chat, params=params).listen(events.append)
        return events

    mixed = engine()
    held = [collect(mixed, person(max_tokens=120, **s)) for s in ({}, seeded(1), seeded(2))]
    free = collect(mixed, free_params)
    run_to_end(mixed)
    for events in held:
        assert events[-1].finish_reason == "stop", events[-1].error
        jsonschema.validate(json.loads("".join(e.text for e in events)), PERSON)
    solo = engine()
    alone_events = collect(solo, free_params)
    run_to_end(solo)
    assert [e.token for e in free] == [e.token for e in alone_events]
