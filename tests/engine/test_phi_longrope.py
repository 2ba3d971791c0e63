"""Phi-3.5's LongRoPE (engine/longrope.py): the engine rotates with the short factors while
its context per sequence is within the model's original one (4096 here), with the long ones
past it, as llama.cpp does (get_rope_factors: n_ctx_seq > n_ctx_orig_yarn), chosen once
for the engine. The reference for each is mlx-lm's stock model given that factor set as
its "long" one (its SuScaledRoPE always takes those).
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from gguf import GGMLQuantizationType
from mlx.utils import tree_flatten

from engine import module_tree
from engine.loader import load_model
from engine.longrope import choose_longrope
from engine.model_runner import ModelRunner
from engine.testing import facts
from tests.engine.conftest import engine_on, run_to_end
from tests.engine.test_same_answer import KINDS, REFERENCE_CONFIG, Run, other_params
from tests.gguf_models import CASES, ArchCase, build_model, gguf_tensors, quantize, write_gguf

CASE = CASES["phi3-longrope"]
SCALING = CASE.config["rope_scaling"]
ORIGINAL = CASE.config["original_max_position_embeddings"]
IDS = [1, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 3, 5, 7, 9, 11, 13, 200]


def _with_long(factors: list[float]) -> ArchCase:
    """The case with `factors` as its long ones (in its config and its file's tensor)."""
    extra = dict(CASE.extra, **{"rope_factors_long.weight": np.array(factors, np.float32)})
    return dataclasses.replace(CASE, config=dict(CASE.config, rope_scaling=dict(
        SCALING, long_factor=factors)), extra=extra)


def _stock(factors: list[float], weights) -> mx.array:
    """mlx-lm's stock model with `factors` as its long ones and these weights: its logits."""
    model = build_model(_with_long(factors))
    model.load_weights(weights)
    return model(mx.array([IDS]))


@pytest.fixture(scope="module")
def f32(tmp_path_factory):
    path = tmp_path_factory.mktemp("phi") / "phi.gguf"
    return load_model(str(write_gguf(path, CASE, gguf_tensors(CASE, build_model(CASE, 1)))))


@pytest.mark.parametrize("context, short", [(ORIGINAL, True), (512, True),
                                            (ORIGINAL + 1, False), (None, False)])
def test_the_factors_follow_the_context_per_sequence(f32, context, short: bool) -> None:
    """The engine's copy with its choice for `context` (None: the model's own, 131072)
    gives the stock model's logits with that factor set, bit for bit (mlx's ops on both:
    only the RoPE's table and scale are the choice's), and the other set's are far."""
    weights = tree_flatten(f32.model.parameters())
    tree = module_tree.clone(f32.model)
    choice = choose_longrope(tree, context)
    assert choice is not None and choice.short is short
    assert choice.context == (context or CASE.config["max_position_embeddings"])
    # the converter's attention factor (the tiny writer writes it as the converter does)
    assert choice.scale == pytest.approx((1 + np.log(131072 / ORIGINAL) / np.log(ORIGINAL))
                                         ** 0.5, rel=1e-6)
    got = np.array(tree(mx.array([IDS])))
    want = np.array(_stock(SCALING["short_factor" if short else "long_factor"], weights))
    other = np.array(_stock(SCALING["long_factor" if short else "short_factor"], weights))
    assert np.array_equal(got, want)
    assert np.abs(got - other).max() > 0.1 * np.abs(want).max()
    # the loaded model itself is mlx-lm's, untouched: the long factors
    assert np.array_equal(np.array(f32.model(mx.array([IDS]))),
                          np.array(_stock(SCALING["long_factor"], weights)))


@pytest.mark.usefixtures("native_built")
@pytest.mark.parametrize("context, short", [(ORIGINAL, True), (2 * ORIGINAL, False)])
def test_the_native_rope_takes_the_same_factors(f32, context: int, short: bool) -> None:
    """ModelRunner's copy (the native RoPE, RMSNorm and attention in an engine pass) gives
    the chosen set's stock logits within the native layers' tolerance
    (test_native_arch_layers: 2e-4 of the range), the other set's far from them."""
    runner = ModelRunner(f32.model, context_length=context)
    assert runner.longrope is not None and runner.longrope.short is short
    with runner._kernels():
        got = np.array(runner.model(mx.array([IDS])))
    weights = tree_flatten(f32.model.parameters())
    want = np.array(_stock(SCALING["short_factor" if short else "long_factor"], weights))
    other = np.array(_stock(SCALING["long_factor" if short else "short_factor"], weights))
    span = np.abs(want).max()
    assert np.abs(got - want).max() <= 2e-4 * span
    assert np.abs(got - other).max() > 0.1 * span


def test_a_file_without_an_attention_factor_scales_by_one(tmp_path: Path) -> None:
    """llama.cpp's rope_attn_factor is 1.0 where the file has no rope.scaling.attn_factor
    (the converter always writes it); mlx-lm's own module would take its default."""
    bare = dataclasses.replace(CASE, metadata=lambda w, c: w.add_rope_scaling_orig_ctx_len(
        ORIGINAL))
    path = write_gguf(tmp_path / "bare.gguf", bare, gguf_tensors(bare, build_model(bare)))
    loaded = load_model(str(path))
    assert loaded.model.args.rope_scaling["attention_factor"] == 1.0
    for context in (ORIGINAL, None):
        choice = choose_longrope(module_tree.clone(loaded.model), context)
        assert choice is not None and choice.scale == 1.0


def test_a_rope_its_config_does_not_rebuild_is_kept() -> None:
    """A model whose RoPE table is not the one its config gives (here its base changed
    after it was built) keeps its own modules: another set from the config would not be
    its own rotation."""
    model = build_model(CASE)
    model.args = dataclasses.replace(model.args, rope_theta=500000.0)
    tree = module_tree.clone(model)
    before = [m for _, m in tree.named_modules()]
    choice = choose_longrope(tree, ORIGINAL)
    assert choice is not None and choice.kept and not choice.short
    assert "own long factors" in choice.note and "kept" in choice.tag
    assert all(a is b for a, b in zip(before, [m for _, m in tree.named_modules()],
                                      strict=True))


def test_a_model_without_longrope_is_left_as_it_is(tmp_path: Path) -> None:
    case = CASES["phi3"]
    model = build_model(case)
    tree = module_tree.clone(model)
    kinds = [type(m) for _, m in tree.named_modules()]
    assert choose_longrope(tree, 16) is None
    assert [type(m) for _, m in tree.named_modules()] == kinds


# -- the whole engine ---------------------------------------------------------------------

def _quantized(tmp: Path, case) -> object:
    tensors, raw = quantize(gguf_tensors(case, build_model(case, seed=2)),
                            GGMLQuantizationType.Q4_0, seed=5)
    return load_model(str(write_gguf(tmp / "q.gguf", case, tensors, raw_types=raw)))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The Q4_0 file, and the same weights in a file whose long factors are its short ones
    (what mlx-lm's stock model runs as the short set)."""
    return (_quantized(tmp_path_factory.mktemp("a"), CASE),
            _quantized(tmp_path_factory.mktemp("b"), _with_long(SCALING["short_factor"])))


def _answer(engine, prompt: list[int], params) -> tuple:
    run = Run(engine, prompt, params)
    run_to_end(engine)
    assert run.stream.finish_reason == "length", run.stream.error
    return tuple((e.token, e.logprob, e.top_logprobs) for e in run.events)


def _prompt(seed: int, n: int = 40) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 260) for _ in range(n)]


@pytest.mark.usefixtures("batch_invariant")
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_engine_within_the_original_context_answers_with_the_short_factors(
        files, kind: str) -> None:
    """An engine of max_context 4096 answers as one on the file whose long factors are the
    short ones, token for token and log-probability for log-probability, also batched and
    chunked beside other requests and from its prefix cache; one past it (8192) answers as
    the model's own context does (the long set), and not as the short one."""
    loaded, short_file = files
    params, prompt = KINDS[kind](n=10, logprobs=2), _prompt(7)
    want = _answer(engine_on(short_file, **REFERENCE_CONFIG), prompt, params)
    alone = engine_on(loaded, max_context=ORIGINAL, **REFERENCE_CONFIG)
    assert any(n.startswith("LongRoPE: the short factors") for n in alone.notes)
    assert _answer(alone, prompt, params) == want

    engine = engine_on(loaded, max_context=ORIGINAL, max_concurrent=8, prefill_burst=7,
                       whole_prompt_tokens=0)
    rng = random.Random(11)
    others = [Run(engine, _prompt(rng.randrange(1000), rng.randint(3, 30)), other_params(rng))
              for _ in range(3)]
    engine.step()
    target = Run(engine, prompt, params)
    run_to_end(engine)
    assert tuple((e.token, e.logprob, e.top_logprobs) for e in target.events) == want
    assert all(o.stream.finish_reason == "length" for o in others)
    again = Run(engine, prompt, params)
    run_to_end(engine)
    assert again.stream.stats.cached_tokens > 0
    assert tuple((e.token, e.logprob, e.top_logprobs) for e in again.events) == want

    longer = _answer(engine_on(loaded, max_context=2 * ORIGINAL, **REFERENCE_CONFIG),
                     prompt, params)
    assert longer == _answer(engine_on(loaded, **REFERENCE_CONFIG), prompt, params)
    assert [e[1] for e in longer] != [e[1] for e in want]


def test_the_disk_store_keeps_the_two_choices_apart(files, tmp_path: Path) -> None:
    """Keys rotated by the short factors are not the long ones': the store's model id
    differs between an engine within the original context and one past it."""
    loaded, _ = files
    ids = {facts(engine_on(loaded, max_context=c, kv_disk_dir=str(tmp_path))).disk_store_id
           for c in (ORIGINAL, 512, 2 * ORIGINAL)}
    assert None not in ids  # each keeps a disk store
    assert len(ids) == 2
