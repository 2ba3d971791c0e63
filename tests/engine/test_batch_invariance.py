"""Issue #25, model level: a prompt's logits are bitwise the same however its positions are
computed (docs: engine/determinism.py).

The reference is the simplest computation: the prompt alone, one token a forward pass
(decode-shaped passes over its own cache). Against it, with np.array_equal on float32 logits:
one pass over the whole prompt, chunks of several sizes, and the prompt's rows inside
batches of 2, 8, 33 and 64 rows (ModelRunner.prefill_many with random other prompts of
random lengths over random cached histories, so the target row sits behind different left
padding at a random row index, then decode steps in the engine's decode batch while other
rows leave and join), all also with the tiled
attention kernel's AVX-512 products switched off. Models: tiny random-weight llamas
quantized as the bundled model is (4 and 8 bits, head sizes 16, 24 and 32) on the native
CPU kernels, and the bundled SmolLM2 model. BATCHCHAT_INVARIANT=0 (the size-dependent
kernel choice of before) shows these comparisons can fail.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from engine import cache as kv
from engine import testing
from engine.cpu_options import CpuOptions
from engine.model_runner import ModelRunner

pytestmark = pytest.mark.usefixtures("native_built")

AVX512_ENV = "BATCHCHAT_NATIVE_AVX512"


def cpu_has_avx512() -> bool:
    try:
        return " avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@dataclass
class Subject:
    name: str
    model: Any
    runner: ModelRunner
    vocab: int  # prompt tokens are drawn below this
    prompt: list[int]
    reference: np.ndarray  # (len(prompt), V): every position's logits, token by token
    sizes: tuple[int, int, int]  # (longest history, longest chunk, decode steps) of others


def token_by_token(runner: ModelRunner, model: Any, tokens: list[int]) -> np.ndarray:
    """The reference: one decode step per token over the prompt's own cache."""
    cache = kv.new_cache(model)
    return np.concatenate([np.array(runner.decode(cache, [t])) for t in tokens])


def all_logits(runner: ModelRunner, cache: kv.LayerCaches, tokens: list[int]) -> np.ndarray:
    """Every position's logits of one chunk run into `cache` as one forward pass."""
    out = runner._forward(mx.array(tokens)[None], cache, list(range(len(tokens))),
                          [0] * len(tokens))
    mx.eval(out)
    return np.array(out)


def chunked(s: Subject, size: int) -> np.ndarray:
    cache = kv.new_cache(s.model)
    return np.concatenate([all_logits(s.runner, cache, s.prompt[i:i + size])
                           for i in range(0, len(s.prompt), size)])


def make_subject(name: str, model: Any, vocab: int, length: int,
                 sizes: tuple[int, int, int]) -> Subject:
    runner = ModelRunner(model, cpu=CpuOptions())  # the native kernels, default switches
    prompt = [random.Random(length).randrange(vocab) for _ in range(length)]
    return Subject(name, model, runner, vocab, prompt, token_by_token(runner, model, prompt),
                   sizes)


def tiny_subject(hidden: int, bits: int, group_size: int) -> Subject:
    from tests.tiny_model import make_tiny_model

    tiny = make_tiny_model(seed=hidden + bits, hidden=hidden)
    nn.quantize(tiny.model, group_size=group_size, bits=bits)
    mx.eval(tiny.model.parameters())
    # 300 positions: several 64-key tiles and 64-query blocks of the tiled kernel
    return make_subject(f"tiny-{hidden}", tiny.model, 256, 300, (90, 70, 4))


def bundled_subject() -> Subject:
    from engine.loader import bundled_model_path, load_model

    loaded = load_model(str(bundled_model_path()))
    # kept short: the reference costs one forward pass per token
    return make_subject("bundled", loaded.model, 20000, 140, (40, 24, 3))


SUBJECTS = {
    # head size 16 (4 heads of 64), 4-bit, groups of 32: AVX-512 and AVX2 tiles
    "tiny-d16-q4": lambda: tiny_subject(64, 4, 32),
    # head size 24: the tiled kernel's AVX2 products only (not a multiple of 16); 8-bit
    "tiny-d24-q8": lambda: tiny_subject(96, 8, 32),
    # head size 32, 4-bit in groups of 64
    "tiny-d32-q4g64": lambda: tiny_subject(128, 4, 64),
    "bundled": bundled_subject,
}


@pytest.fixture(scope="module", params=[
    *[name for name in SUBJECTS if name != "bundled"],
    pytest.param("bundled", marks=pytest.mark.bundled),
])
def subject(request) -> Subject:
    return SUBJECTS[request.param]()


@pytest.fixture(params=["avx512-default", "avx512-off"])
def avx512(request, monkeypatch) -> str:
    """The tiled attention kernel with its default products, and with AVX-512 switched off
    (read at every call). The reference is always computed with the default, so "off" also
    checks that the AVX2 products give the AVX-512 ones bit for bit."""
    if request.param == "avx512-off":
        if not cpu_has_avx512():
            pytest.skip("the CPU has no AVX-512: the default already is the AVX2 path")
        monkeypatch.setenv(AVX512_ENV, "0")
    return request.param


def first_difference(got: np.ndarray, want: np.ndarray) -> str:
    rows = [i for i in range(len(want)) if not np.array_equal(got[i], want[i])]
    if not rows:
        return "equal"
    return (f"{len(rows)}/{len(want)} rows differ, first at row {rows[0]}, "
            f"max |diff| {np.abs(got - want).max():.3g}")


# -- one prompt alone --------------------------------------------------------------------


def test_decode_step_equals_the_same_position_in_a_forward_pass_alone(subject) -> None:
    """The reference itself: decode's logits (every position through the head) equal the
    prefill path's (the one wanted position gathered before the head)."""
    cache = kv.new_cache(subject.model)
    n = len(subject.prompt)
    subject.runner.prefill(cache, subject.prompt[:-1])
    last = subject.runner.prefill(cache, subject.prompt[-1:], logits=True)
    assert np.array_equal(np.array(last)[0], subject.reference[n - 1])


@pytest.mark.usefixtures("avx512")
@pytest.mark.parametrize("chunk", [0, 64, 17, 5, 2], ids=lambda c: f"chunk{c or 'all'}")
def test_every_position_in_one_pass_or_chunks_equals_token_by_token(subject, chunk) -> None:
    if subject.name == "bundled" and chunk == 2:
        pytest.skip("bundled model: chunks of 5 and up are enough (time)")
    got = chunked(subject, chunk or len(subject.prompt))
    assert got.shape == subject.reference.shape
    assert np.array_equal(got, subject.reference), first_difference(got, subject.reference)


def test_the_last_token_of_prefill_equals_token_by_token_at_any_split(subject) -> None:
    """ModelRunner.prefill (the engine's solo prefill path): the last position's logits of a
    prompt run in two uneven chunks, at several split points."""
    n = len(subject.prompt)
    for split in (1, 63, 64, 65, n // 2, n - 1):
        cache = kv.new_cache(subject.model)
        subject.runner.prefill(cache, subject.prompt[:split])
        last = np.array(subject.runner.prefill(cache, subject.prompt[split:], logits=True))
        assert np.array_equal(last[0], subject.reference[n - 1]), f"split at {split}"


# -- the prompt's rows inside batches ----------------------------------------------------


def batched_all_positions(runner: ModelRunner, caches: list[kv.LayerCaches],
                          chunks: list[list[int]], row: int
                          ) -> tuple[list[kv.LayerCaches], np.ndarray]:
    """ModelRunner.prefill_many's pass (chunks right-padded, histories left-padded), but
    with every position of `row`'s chunk put through the head, not just its last one."""
    batch = kv.merge(caches)
    width = max(len(c) for c in chunks)
    right = [width - len(c) for c in chunks]
    for layer in batch:
        layer.prepare(right_padding=right)
    out = runner._forward(mx.array([c + [0] * r for c, r in zip(chunks, right, strict=True)]),
                          batch, list(range(len(chunks[row]))), [row] * len(chunks[row]))
    for layer in batch:
        layer.finalize()
    rows = [kv.extract(batch, i) for i in range(len(chunks))]
    mx.eval(out, [layer.state for r in rows for layer in r])
    return rows, np.array(out)


def other_rows(s: Subject, rng: random.Random, count: int, longest: int) -> list[list[int]]:
    return [[rng.randrange(s.vocab) for _ in range(rng.randint(0, longest))]
            for _ in range(count)]


def check_inside_batch(s: Subject, size: int, seed: int) -> None:
    rng = random.Random(seed)
    longest_history, longest_chunk, steps = s.sizes
    P, ref, n = s.prompt, s.reference, len(s.prompt)
    row = rng.randrange(size)  # where the prompt sits in the batch
    # the prompt: a cached history, two chunks run in batches, then decode steps in a batch
    h = rng.randint(0, n - 2 * longest_chunk - steps - 2)
    c1 = rng.randint(1, longest_chunk)
    c2 = rng.randint(1, longest_chunk)
    histories = other_rows(s, rng, size, longest_history)
    histories[row] = P[:h]
    caches = [kv.new_cache(s.model) for _ in range(size)]
    for cache, history in zip(caches, histories, strict=True):
        if history:
            s.runner.prefill(cache, history)
    where = f"{s.name}, batch of {size}, row {row}, history {h}, chunks {c1}+{c2}"

    # chunk 1, every position of the prompt's rows through the head
    chunks = [ch or [rng.randrange(s.vocab)] for ch in other_rows(s, rng, size, longest_chunk)]
    chunks[row] = P[h:h + c1]
    caches, got = batched_all_positions(s.runner, caches, chunks, row)
    assert np.array_equal(got, ref[h:h + c1]), \
        f"{where}: chunk 1: {first_difference(got, ref[h:h + c1])}"

    # chunk 2 through the engine's own call; some other rows sit this pass out
    taking = sorted({row} | {i for i in range(size) if rng.random() < 0.7})
    chunks = {i: [rng.randrange(s.vocab) for _ in range(rng.randint(1, longest_chunk))]
              for i in taking}
    chunks[row] = P[h + c1:h + c1 + c2]
    updated, out = s.runner.prefill_many([caches[i] for i in taking],
                                         [chunks[i] for i in taking], [True] * len(taking))
    for i, cache in zip(taking, updated, strict=True):
        caches[i] = cache
    got = np.array(out)[taking.index(row)]
    assert np.array_equal(got, ref[h + c1 + c2 - 1]), f"{where}: chunk 2's last position"

    # decode steps in the engine's decode batch; halfway, some other rows leave (the last
    # rows move into their places) and a newcomer joins
    batch = kv.start_batch(caches)
    at, rows = h + c1 + c2, size
    for step in range(steps):
        if step == steps // 2 and size > 2:
            keep = sorted({row} | {i for i in range(rows) if rng.random() < 0.5})
            row = kv.keep_rows(batch, keep).index(row)
            newcomer = kv.new_cache(s.model)
            s.runner.prefill(newcomer, other_rows(s, rng, 1, longest_history)[0] or [1])
            kv.add_rows(batch, [newcomer])
            rows = len(keep) + 1
        tokens = [rng.randrange(s.vocab) for _ in range(rows)]
        tokens[row] = P[at + step]
        got = np.array(s.runner.decode(batch, tokens))[row]
        assert np.array_equal(got, ref[at + step]), f"{where}: decode step {step}, row {row}"


@pytest.mark.parametrize("size", [2, 8, 33, 64])
def test_rows_inside_batches_with_random_others_equal_token_by_token(subject, size,
                                                                     avx512) -> None:
    if subject.name == "bundled" and (size == 64 or size == 33 and avx512 != "avx512-default"):
        pytest.skip("bundled model: batches of 2, 8 and 33 (time); the tiny models take 64")
    check_inside_batch(subject, size, seed=size)


def test_rows_inside_batches_at_many_random_offsets(subject) -> None:
    """More draws of row index, history and chunk lengths (small batches: cheap)."""
    draws = 3 if subject.name == "bundled" else 12
    for seed in range(draws):
        check_inside_batch(subject, 2 + seed % 3, seed=1000 + seed)


# -- the comparisons have teeth ----------------------------------------------------------


def test_the_size_dependent_kernels_of_before_fail_these_comparisons(subject) -> None:
    """BATCHCHAT_INVARIANT=0 (CpuOptions.invariant): the linears of big passes go through
    dequantize + BLAS and short passes' attention through the two-pass kernel, so one pass
    over the prompt no longer equals token by token. A runner builds its own modules, so
    the subject's own (default) runner still agrees afterwards."""
    model = subject.model
    runner = ModelRunner(model, cpu=CpuOptions(invariant=False))
    old = token_by_token(runner, model, subject.prompt)
    one_pass = all_logits(runner, kv.new_cache(model), subject.prompt)
    assert not np.array_equal(one_pass, old)
    again = all_logits(subject.runner, kv.new_cache(model), subject.prompt)
    assert np.array_equal(again, subject.reference)


# -- known exceptions (non-default paths), kept as strict expected failures ----------------


def alone_vs_one_pass(model: Any, cpu: CpuOptions | None = None,
                      ) -> tuple[np.ndarray, np.ndarray]:
    runner = ModelRunner(model, cpu=cpu or CpuOptions())
    prompt = [random.Random(7).randrange(256) for _ in range(80)]
    return (token_by_token(runner, model, prompt),
            all_logits(runner, kv.new_cache(model), prompt))


@pytest.mark.xfail(strict=True, reason=(
    "issue #25: with float32 activations (BATCHCHAT_NATIVE_INT8=0) the native quantized "
    "matvec computes rows in blocks of 4 with another summation order than a lone row "
    "(e.g. quantized_matvec(x[:4], ..., int8_x=False)[0] != quantized_matvec(x[:1], ...)[0], "
    "up to ~1e-5), so a prompt's logits depend on how many rows share the pass"))
def test_float32_activations_on_the_native_kernel() -> None:
    from tests.tiny_model import make_tiny_model

    tiny = make_tiny_model(seed=21, hidden=64)
    nn.quantize(tiny.model, group_size=32, bits=4)
    mx.eval(tiny.model.parameters())
    alone, one_pass = alone_vs_one_pass(tiny.model, CpuOptions(int8=False))
    assert np.array_equal(one_pass, alone), first_difference(one_pass, alone)


def _fast_blas() -> bool:
    from engine.blas import is_fast_blas_loaded

    return is_fast_blas_loaded()


def test_unquantized_float32_model() -> None:
    """An unquantized model's nn.Linear modules run the native fixed-order float product
    (engine/native/float_layers.py), so its rows are computed alike in any pass."""
    from tests.tiny_model import make_tiny_model

    model = make_tiny_model(seed=22, hidden=64).model
    runner = ModelRunner(model, cpu=CpuOptions())
    assert any(type(m).__name__ == "NativeFloatLinear" for _, m in runner.model.named_modules())
    alone, one_pass = alone_vs_one_pass(model)
    assert np.array_equal(one_pass, alone), first_difference(one_pass, alone)


@pytest.mark.xfail(condition=_fast_blas(), strict=True, reason=(
    "issue #25: with BATCHCHAT_INVARIANT=0 an unquantized float32 model's linears are MLX "
    "matmuls, which OpenBLAS computes with one kernel for a single row and another from 16 "
    "rows on (x[:1] @ w.T != (x[:16] @ w.T)[:1], ~5e-6): not batch-invariant"))
def test_unquantized_float32_model_on_blas() -> None:
    from tests.tiny_model import make_tiny_model

    alone, one_pass = alone_vs_one_pass(make_tiny_model(seed=22, hidden=64).model,
                                        CpuOptions(invariant=False))
    assert np.array_equal(one_pass, alone), first_difference(one_pass, alone)


# -- the prompt's rows inside ragged passes (a tick's decode rows and chunks together) ---


def check_in_ragged_passes(s: Subject, rows: int, seed: int) -> None:
    """ModelRunner.ragged (engine/ragged_pass.py): the prompt's chunks run beside `rows`
    decode rows (the engine's slot batch, or one row alone) and other prompts' chunks over
    their own histories, then the prompt decodes as one of the rows beside another chunk."""
    rng = random.Random(seed)
    longest_history, longest_chunk, steps = s.sizes
    P, ref, n = s.prompt, s.reference, len(s.prompt)

    def fresh(history_max: int) -> kv.LayerCaches:
        cache = kv.new_cache(s.model)
        history = other_rows(s, rng, 1, history_max)[0]
        if history:
            s.runner.prefill(cache, history)
        return cache

    decoders = [fresh(longest_history) or [] for _ in range(rows)]
    for cache in decoders:
        if cache[0].offset == 0:
            s.runner.prefill(cache, [1])
    batch = kv.start_batch(decoders) if rows > 1 else decoders[0]
    h = rng.randint(0, n - 2 * longest_chunk - steps - 2)
    target = kv.new_cache(s.model)
    if h:
        s.runner.prefill(target, P[:h])
    where = f"{s.name}, {rows} decode rows, history {h}"
    at = h
    for part in range(2):
        c = rng.randint(1, longest_chunk)
        chunks = [(fresh(longest_history), [rng.randrange(s.vocab)
                                            for _ in range(rng.randint(1, longest_chunk))])
                  for _ in range(rng.randint(0, 2))]
        slot = rng.randint(0, len(chunks))
        chunks.insert(slot, (target, P[at:at + c]))
        tokens = [rng.randrange(s.vocab) for _ in range(rows)]
        _, ends = s.runner.ragged(batch, tokens, chunks, [True] * len(chunks))
        got = np.array(ends)[slot]
        assert np.array_equal(got, ref[at + c - 1]), f"{where}: chunk {part} ({c} tokens)"
        at += c
    if rows > 1:
        kv.add_rows(batch, [target])
        row = rows
    else:  # the prompt decodes alone; the other row is done
        batch, row = target, 0
    for step in range(steps):
        tokens = [rng.randrange(s.vocab) for _ in range(row + 1)]
        tokens[row] = P[at + step]
        beside = [(fresh(longest_history), [rng.randrange(s.vocab)
                                            for _ in range(rng.randint(1, longest_chunk))])]
        got, _ = s.runner.ragged(batch, tokens, beside, [step % 2 == 0])
        assert np.array_equal(np.array(got)[row], ref[at + step]), \
            f"{where}: decode step {step} as row {row} of a ragged pass"


@pytest.mark.parametrize("rows", [1, 2, 9])
def test_rows_and_chunks_in_ragged_passes_equal_token_by_token(subject, rows) -> None:
    if not testing.runs_ragged(subject.runner):
        pytest.skip("this model's passes are not ragged here")
    for seed in range(1 if subject.name == "bundled" else 3):
        check_in_ragged_passes(subject, rows, seed=100 * rows + seed)
