"""Issue #31: a draft model (speculative="draft:PATH") drafts, the target checks, and the
answers stay exactly those without speculation.

The draft model here is the target itself, saved as an mlx-lm directory and loaded back:
its greedy drafts are the target's own greedy tokens, so nearly all are accepted (several
tokens a step), and a greedy or seeded reply must equal the one without speculation token
for token, alone and in a batch. A draft model with another tokenizer, or a path that is
not a model, is refused with an error naming the path and the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import EngineConfig, SamplingParams, testing
from engine.draft_model import DraftModel, check_same_tokenizer
from engine.loader import ModelLoadError
from tests import tiny_model
from tests.engine.conftest import drafting_pays, engine_on, native_quantized_tiny, run_to_end
from tests.engine.test_speculation import greedy, seeded
from tests.tiny_model import make_tokenizer

N = 40


def save_mlx_dir(tiny, d: Path, tokenizer=None) -> Path:
    """`tiny` (4-bit, group 32) as an mlx-lm model directory."""
    return tiny_model.save_mlx_dir(tiny, d, {"group_size": 32, "bits": 4}, tokenizer)


@pytest.fixture(scope="module")
def qtiny():
    return native_quantized_tiny(seed=11)


@pytest.fixture(scope="module")
def own_draft(qtiny, tmp_path_factory) -> str:
    """The target saved as its own draft model: "draft:PATH"."""
    return "draft:" + str(save_mlx_dir(qtiny, tmp_path_factory.mktemp("draft")))


def drafting_engine(qtiny, speculative: str, **config):
    """An engine whose rows draft: the target drafting for itself costs a step per draft,
    which the engine's measurements would rightly refuse, and these tests are about what
    happens when rows draft."""
    return drafting_pays(engine_on(qtiny, speculative=speculative, **config))


def run(qtiny, speculative: str, prompts: list[list[int]], params: list[SamplingParams],
        stagger: bool = False, row_by_row: bool = False, **config):
    engine = drafting_engine(qtiny, speculative, **config)
    if row_by_row:  # the draft passes one row at a time (a runner without ragged passes)
        draft_source(engine).runner._ragged_model = False
    streams = []
    for p, sp in zip(prompts, params, strict=True):
        streams.append(engine.submit(prompt_tokens=p, params=sp))
        if stagger:
            for _ in range(3):
                engine.step()
    run_to_end(engine)
    for s in streams:
        assert s.finish_reason == "length", s.error
    return [list(s.tokens) for s in streams], [s.stats for s in streams], engine


def draft_source(engine) -> DraftModel:
    source = testing.facts(engine).draft_source
    assert isinstance(source, DraftModel)
    return source


def open_prompt(seed: int, length: int = 30) -> list[int]:
    """A prompt with no repeats: n-gram lookup has nothing to draft from it."""
    import random

    return random.Random(seed).sample(range(256), length)


def test_own_greedy_drafts_are_accepted_and_change_nothing(qtiny, own_draft) -> None:
    for seed in range(2):
        prompt = [open_prompt(seed)]
        off, _, _ = run(qtiny, "off", prompt, [greedy(60)])
        on, stats, engine = run(qtiny, own_draft, prompt, [greedy(60)])
        assert on == off
        assert stats[0].drafted_tokens > 0
        assert stats[0].acceptance > 0.9  # the target drafting for itself
        assert stats[0].tokens_per_step > 2
        assert draft_source(engine).passes > 0
        assert draft_source(engine).rows == {}  # the finished row's draft KV is gone


def test_seeded_and_penalised_alone_give_the_same_tokens(qtiny, own_draft) -> None:
    for params in (seeded(3), SamplingParams(max_tokens=N, temperature=0.7, seed=5,
                                             repetition_penalty=1.1)):
        prompt = [open_prompt(7)]
        off, _, _ = run(qtiny, "off", prompt, [params])
        on, stats, _ = run(qtiny, own_draft, prompt, [params])
        assert on == off
        assert stats[0].drafted_tokens > 0 and stats[0].accepted_tokens > 0


@pytest.mark.parametrize(("stagger", "row_by_row"), [(False, False), (True, False),
                                                    (True, True)])
def test_in_a_batch_the_draft_model_gives_the_same_tokens(qtiny, own_draft, stagger,
                                                          row_by_row) -> None:
    """Eight rows (greedy and seeded), together or joining while others decode and draft,
    each equal to its run alone without speculation; the draft passes shared by the rows
    (a ragged pass) or one row at a time."""
    prompts = [open_prompt(20 + i, length=8 + 3 * i) for i in range(8)]
    params = [greedy() if i % 2 else seeded(100 + i) for i in range(8)]
    alone = [run(qtiny, "off", [p], [sp])[0][0] for p, sp in zip(prompts, params, strict=True)]
    together, stats, engine = run(qtiny, own_draft, prompts, params, stagger=stagger,
                                  row_by_row=row_by_row)
    source = draft_source(engine)
    assert testing.runs_ragged(source.runner) is not row_by_row
    assert together == alone
    greedy_stats = [s for s, sp in zip(stats, params, strict=True) if sp.temperature == 0]
    assert sum(s.accepted_tokens for s in greedy_stats) > 0.9 * sum(
        s.drafted_tokens for s in greedy_stats) > 0
    assert engine.stats().drafted_tokens == sum(s.drafted_tokens for s in stats)
    assert source.rows == {}


def test_a_long_prompt_is_read_in_chunks_then_drafts(qtiny, own_draft) -> None:
    """A prompt longer than the draft model's chunk is read over several steps (no drafts
    meanwhile), then the row drafts; and a next turn (the prefix cache) drafts too."""
    prompt = open_prompt(30, length=200)
    off, _, _ = run(qtiny, "off", [prompt, prompt + [1, 2, 3]], [greedy(), seeded(8)])
    engine = drafting_engine(qtiny, own_draft)
    draft_source(engine).chunk = 64
    a = engine.submit(prompt_tokens=prompt, params=greedy())
    run_to_end(engine)
    b = engine.submit(prompt_tokens=prompt + [1, 2, 3], params=seeded(8))
    run_to_end(engine)
    assert [list(a.tokens), list(b.tokens)] == off
    assert a.stats.drafted_tokens > 0 and b.stats.drafted_tokens > 0


def test_cancelling_a_drafting_row_frees_its_draft_cache(qtiny, own_draft) -> None:
    engine = drafting_engine(qtiny, own_draft)
    a = engine.submit(prompt_tokens=open_prompt(40), params=greedy(200))
    b = engine.submit(prompt_tokens=open_prompt(41), params=greedy(200))
    source = draft_source(engine)
    for _ in range(50):
        engine.step()
        if len(source.rows) == 2:
            break
    assert set(source.rows) == {a.request_id, b.request_id}  # both draft, each its own KV
    engine.cancel(a.request_id)
    engine.step()
    assert a.finish_reason == "cancelled"
    assert set(source.rows) == {b.request_id}
    run_to_end(engine)
    assert source.rows == {}


def test_a_draft_model_with_another_tokenizer_is_refused(qtiny, tmp_path) -> None:
    other = make_tokenizer()
    other._tokenizer.add_special_tokens({"additional_special_tokens": ["<|tool|>"]})
    path = save_mlx_dir(qtiny, tmp_path / "other", tokenizer=other)
    with pytest.raises(ModelLoadError, match="tokenizer differs") as e:
        engine_on(qtiny, speculative=f"draft:{path}")
    assert str(path) in str(e.value) and "260 tokens" in str(e.value)


def test_an_optional_draft_model_with_another_tokenizer_is_left_out(qtiny, tmp_path) -> None:
    """speculative_draft_optional (a model manager's other models, issue #50): the model
    loads without the draft, drafts by n-gram, says why, and answers as without it; a
    draft that cannot be read at all is still refused."""
    other = make_tokenizer()
    other._tokenizer.add_special_tokens({"additional_special_tokens": ["<|tool|>"]})
    path = save_mlx_dir(qtiny, tmp_path / "other", tokenizer=other)
    engine = engine_on(qtiny, speculative=f"draft:{path}", speculative_draft_optional=True)
    assert engine.stats().speculative == "ngram"
    assert not isinstance(testing.facts(engine).draft_source, DraftModel)
    assert [n for n in engine.notes if f"draft model {path} left out" in n
            and "260 tokens" in n and "n-gram" in n]
    prompts = [open_prompt(7), open_prompt(8)]
    params = [greedy(40), greedy(40)]
    streams = [engine.submit(prompt_tokens=p, params=q)
               for p, q in zip(prompts, params, strict=True)]
    run_to_end(engine)
    expected, _, _ = run(qtiny, "off", prompts, params)
    assert [list(s.tokens) for s in streams] == expected
    with pytest.raises(ModelLoadError, match="no such file"):
        engine_on(qtiny, speculative=f"draft:{tmp_path / 'nope.gguf'}",
                  speculative_draft_optional=True)


def test_tokenizers_with_the_same_size_but_other_tokens_differ() -> None:
    check_same_tokenizer("d", {"a": 0, "b": 1}, {"a": 0, "b": 1})
    with pytest.raises(ModelLoadError, match="token 1 is 'c' there, 'b' in the model"):
        check_same_tokenizer("d", {"a": 0, "b": 1}, {"a": 0, "c": 1})


def test_a_bad_path_is_a_clear_error(qtiny, tmp_path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelLoadError, match="draft model") as e:
        engine_on(qtiny, speculative=f"draft:{missing}")
    assert str(missing) in str(e.value) and "no such file" in str(e.value)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="draft model") as e:
        engine_on(qtiny, speculative=f"draft:{junk}")
    assert str(junk) in str(e.value)


@pytest.mark.parametrize("mode", ["draft:", "draft: ", "draft", "model:x"])
def test_config_rejects_a_malformed_mode(mode) -> None:
    with pytest.raises(ValueError, match="EngineConfig.speculative must be one of"):
        EngineConfig(speculative=mode)


def test_config_takes_a_draft_path() -> None:
    assert EngineConfig(speculative="draft:/models/small").speculative == "draft:/models/small"


def test_a_source_that_always_drafts_still_gets_plain_steps_measured() -> None:
    """A draft model always has drafts, so no step would run plain by itself and the
    costs that decide whether drafting pays would never be known: a step that could
    measure (no prefill) runs plain while the plain time at its row count is unknown or
    stale, and drafting stops where a drafted position costs more than it gains."""
    from engine.speculation import Speculation

    class Always:
        def propose(self, rows):
            return [[1] * k for _, k in rows]

        def likely(self, seq):
            return True

        def forget(self, seq):
            pass

    class Row:
        prompt_tokens = [1, 2, 3]
        num_prompt_tokens = 3
        output_tokens: list[int] = []
        matcher = None
        params = SamplingParams(max_tokens=100)
        spec = None
        is_finished = False
        num_output_tokens = 0
        num_tokens = 3

    spec = Speculation("draft:x", max_drafts=8, source=Always())
    rows = [Row(), Row()]
    assert spec.plan(rows, 1000, can_measure=True) == {}  # measure first
    assert spec.plan(rows, 1000) == {0: [1] * 4, 1: [1] * 4}  # (a tick with prefill)
    spec.costs.observe_plain(2, 0.020)
    assert spec.plan(rows, 1000, can_measure=True) == {0: [1] * 4, 1: [1] * 4}
    for _ in range(spec.costs.refresh_every):
        spec.costs.observe_checked(2, 8, 0.020 + 8 * 0.001)
    assert spec.plan(rows, 1000, can_measure=True) == {}  # stale: measured again
    spec.costs.observe_plain(2, 0.020)
    spec.costs.set_check(0.050, rows=2)  # a draft pass costs more than a token is worth
    assert spec.plan(rows, 1000, can_measure=True) == {}
    assert not spec.will_draft(rows)  # (its steps run ahead where the backend does)


def test_speculation_needs_the_draft_model_it_names() -> None:
    from engine.speculation import Speculation

    with pytest.raises(ValueError, match="needs its draft model"):
        Speculation("draft:/models/small")


@pytest.fixture(scope="module")
def bundled():
    """The bundled model, loaded once for both kinds (each engine makes its own copy of the
    modules; test_speculation_bundled.py shares its load likewise): ~3.5 CPU-s a load."""
    from engine.loader import bundled_model_path, load_model

    return load_model(str(bundled_model_path()))


@pytest.mark.bundled
@pytest.mark.parametrize("kind", ["greedy", "seeded"])
def test_the_bundled_model_drafting_for_itself_changes_no_reply(bundled, kind) -> None:
    """On the bundled model (its default CPU path), the GGUF loaded again as its own draft
    model: code replies alone and four at once equal those without speculation."""
    from engine import Engine
    from engine.loader import bundled_model_path
    from tests.engine.test_speculation_bundled import ASKS, CODE

    path = str(bundled_model_path())
    loaded = bundled
    params = [SamplingParams(max_tokens=48) if kind == "greedy" else
              SamplingParams(max_tokens=48, temperature=0.7, top_p=0.9, seed=20 + i)
              for i in range(len(ASKS))]

    def answers(speculative: str, together: bool):
        engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=loaded.eos_token_ids,
                        context_length=loaded.context_length,
                        config=EngineConfig(max_concurrent=8, speculative=speculative))
        drafting_pays(engine)
        streams = []
        for ask, sp in zip(ASKS, params, strict=True):
            streams.append(engine.submit(messages=[{"role": "user", "content": ask + CODE}],
                                         params=sp))
            if not together:
                run_to_end(engine)
        run_to_end(engine)
        assert all(s.error is None for s in streams)
        return [list(s.tokens) for s in streams], [s.stats for s in streams]

    off, _ = answers("off", together=False)
    for together in (False, True):
        on, stats = answers(f"draft:{path}", together)
        assert on == off
        drafted = sum(s.drafted_tokens for s in stats)
        accepted = sum(s.accepted_tokens for s in stats)
        assert drafted > 0 and accepted > (0.9 if kind == "greedy" else 0.3) * drafted


def test_a_draft_pass_that_fails_leaves_the_replies_as_they_are(qtiny, own_draft,
                                                                monkeypatch) -> None:
    """Drafts are optional: a draft model whose pass raises (out of memory, say) costs the
    rows their drafts for that step and its KV for them, never their reply."""
    prompts = [open_prompt(60), open_prompt(61)]
    params = [greedy(), seeded(6)]
    off, _, _ = run(qtiny, "off", prompts, params)
    engine = drafting_engine(qtiny, own_draft)
    source = draft_source(engine)
    passes = source._pass
    calls = []

    def flaky(pieces, logits):
        calls.append(len(pieces))
        if len(calls) % 5 == 3:
            raise MemoryError("no room for the draft pass")
        return passes(pieces, logits)

    monkeypatch.setattr(source, "_pass", flaky)
    streams = [engine.submit(prompt_tokens=p, params=sp)
               for p, sp in zip(prompts, params, strict=True)]
    run_to_end(engine)
    assert [list(s.tokens) for s in streams] == off
    assert all(s.error is None for s in streams)
    assert len(calls) >= 5 and sum(s.stats.accepted_tokens for s in streams) > 0


def test_a_rows_draft_kv_holds_its_text_then_its_unchecked_drafts(qtiny, own_draft) -> None:
    """After every step each drafting row's draft KV holds exactly its tokens list (the
    cache offset), which is the row's text up to what it was last fed, then drafts; a
    seeded row's refused drafts are rolled back before the next ones."""
    engine = drafting_engine(qtiny, own_draft)
    streams = [engine.submit(prompt_tokens=open_prompt(70 + i), params=p)
               for i, p in enumerate([greedy(60), seeded(7, 60)])]
    source = draft_source(engine)
    rolled = 0
    while engine.has_work():
        before = {rid: len(row.tokens) for rid, row in source.rows.items()}
        engine.step()
        for rid, row in source.rows.items():
            seq = testing.sequence(engine, rid)
            text = seq.prompt_tokens + seq.output_tokens
            assert all(layer.offset == len(row.tokens) for layer in row.cache)
            assert row.tokens[:row.known] == text[:row.known]
            rolled += before.get(rid, 0) > row.known
    assert rolled > 0  # some drafts were refused and taken back
    assert all(s.finish_reason == "length" for s in streams)
