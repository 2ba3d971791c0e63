"""Issue #54: quantized KV (EngineConfig.kv_bits 8 and 4, engine/kv_quant.py).

The same-answer guarantee at each setting, with test_same_answer's helpers: the reference is
the request alone at that setting, its prompt one token a tick, no prefix cache; against it
(tokens and log-probabilities compared with ==) the request alone under other chunkings,
among others joining and leaving, in a burst, from the prefix cache, a next turn, from a
prefix restored from a quantized KV file after a restart, as one of several answers sharing
a prompt, and with n-gram speculation (refused drafts taken back). Also: the packed form
against mlx's own quantization, the native kernel reading packed rows, an old float KV file
loading into a quantized engine, and the KV budget's tokens at 8 bits.
"""

from __future__ import annotations

import random

import mlx.core as mx
import pytest

from engine import EngineConfig, SamplingParams, native, testing
from engine.kv_quant import KvPacking, PackedLayer
from tests.engine.conftest import engine_on, quantized_tiny, run_to_end
from tests.engine.test_same_answer import (
    KINDS,
    REFERENCE_CONFIG,
    Run,
    Watch,
    greedy,
    other_prompt,
    start_others,
    target_prompt,
)

pytestmark = pytest.mark.usefixtures("native_built")


@pytest.fixture(scope="module")
def qtiny():
    return quantized_tiny(seed=11, hidden=128)  # head size 32: one group of 32 a head


@pytest.fixture(scope="module", params=[8, 4], ids=["kv8", "kv4"])
def bits(request) -> int:
    return request.param


def reference(model, prompt, params, bits):
    engine = engine_on(model, kv_bits=bits, **REFERENCE_CONFIG)
    run = Run(engine, prompt, params)
    run_to_end(engine)
    return run.answer


@pytest.fixture(scope="module")
def references(qtiny, bits):
    prompt = target_prompt()
    return prompt, {kind: reference(qtiny, prompt, make(), bits) for kind, make in KINDS.items()}


# -- the form ------------------------------------------------------------------------------


def test_kv_bits_is_checked() -> None:
    for bad in (2, 16, 3, "8", 8.0, True):
        with pytest.raises(ValueError, match="kv_bits"):
            EngineConfig(kv_bits=bad)
    assert EngineConfig(kv_bits=8).kv_bits == 8 and EngineConfig().kv_bits is None


@pytest.mark.parametrize("bits_", [8, 4])
@pytest.mark.parametrize("dim", [32, 64, 128])
def test_packed_rows_are_mlx_quantization_laid_end_to_end(bits_, dim) -> None:
    p = KvPacking.for_head(bits_, dim)
    x = mx.random.normal((2, 3, 5, dim), key=mx.random.key(1)) * 3
    rows = p.pack(x)
    assert rows.dtype == mx.uint8 and rows.shape == (2, 3, 5, p.width(dim))
    assert p.head_dim(rows.shape[-1]) == dim
    assert p.turned == (bits_ == 4)  # 4 bits round the rows times Walsh-Hadamard's H
    turn = mx.hadamard_transform if p.turned else (lambda a: a)
    w, s, b = mx.quantize(turn(x), group_size=p.group, bits=bits_)
    assert mx.array_equal(rows, mx.concatenate([w.view(mx.uint8), s.view(mx.uint8),
                                                b.view(mx.uint8)], axis=-1)).item()
    want = turn(mx.dequantize(w, s, b, group_size=p.group, bits=bits_))
    assert mx.array_equal(p.unpack(rows), want).item()
    assert KvPacking.from_tag(p.tag) == p and p.tag == f"q{bits_}g{p.group}" + "h" * p.turned
    # a row depends on its own token only: packing one position alone gives its bytes
    assert mx.array_equal(p.pack(x[1:2, :, 3:4]), rows[1:2, :, 3:4]).item()
    err = mx.abs(p.unpack(rows) - x).max().item()
    assert err < (0.1 if bits_ == 8 else 1.5)
    assert p.width(dim) * 3 < dim * 4  # against float32: more than 3x fewer bytes


@pytest.mark.parametrize("bits_", [8, 4])
@pytest.mark.parametrize("queries", [1, 5, 70])
def test_the_native_kernel_reads_packed_rows(bits_, queries) -> None:
    """Attention over packed keys and values equals attention over their dequantized
    floats, for a decode row, a short chunk and a long one (causal), and grouped heads."""
    p = KvPacking.for_head(bits_, 64)
    k = mx.random.normal((2, 2, 90, 64), key=mx.random.key(2))
    v = mx.random.normal((2, 2, 90, 64), key=mx.random.key(3))
    q = mx.random.normal((2, 6, queries, 64), key=mx.random.key(4))
    kp, vp = p.pack(k), p.pack(v)
    mask = "causal" if queries > 1 else None
    got = native.cache_attention(q, kp, vp, 0.125, mask, packing=p)
    want = native.cache_attention(q, p.unpack(kp), p.unpack(vp), 0.125, mask)
    assert mx.allclose(got, want, rtol=1e-5, atol=1e-5).item()
    ref = mx.fast.scaled_dot_product_attention(q, p.unpack(kp), p.unpack(vp), scale=0.125,
                                               mask=mask)
    assert mx.allclose(got, ref, rtol=1e-4, atol=1e-4).item()
    # without the SIMD kernel (force_scalar): the rows dequantized whole, the same result
    scalar = native.cache_attention(q, kp, vp, 0.125, mask, packing=p, force_scalar=True)
    assert mx.allclose(scalar, got, rtol=1e-5, atol=1e-5).item()
    # one batch row alone gives that row's bits in the batch
    alone = native.cache_attention(q[1:], kp[1:], vp[1:], 0.125, mask, packing=p)
    assert mx.array_equal(alone, got[1:]).item()


def engine_cache(tiny):
    from engine import cache as kv

    return kv.new_cache(tiny.model)


def test_the_engine_keeps_packed_rows_and_its_kernel_reads_them(qtiny) -> None:
    engine = engine_on(qtiny, kv_bits=8)
    now = testing.facts(engine)
    assert now.kv_packing == KvPacking(8, 32) and now.fused_kv
    view = testing.internals(engine).runner.view  # the runner's own wrapping, called
    assert all(isinstance(c, PackedLayer) for c in view(engine_cache(qtiny)))
    assert now.ragged  # rows and chunks share a pass over packed rows too
    run = Run(engine, target_prompt(), KINDS["greedy"]())
    others = start_others(engine, random.Random(1), 4)
    run_to_end(engine)
    entry = testing.facts(engine).prefix_kv[0]
    assert all(layer.keys.dtype == mx.uint8 for layer in entry)
    assert len(run.events) == 16 and all(o.stream.finish_reason == "length" for o in others)
    assert testing.facts(engine).compiled_traces > 0  # the compiled step packs as well


# -- same answers --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("config", [
    {},
    {"prefill_burst": 7, "whole_prompt_tokens": 0},
    {"prefill_burst": 33, "whole_prompt_tokens": 0, "max_token_budget": 40,
     "min_prefill_tokens": 5, "max_concurrent": 4},
], ids=["default", "burst7", "budget40"])
def test_alone_with_any_chunk_budget(qtiny, references, bits, kind, config) -> None:
    prompt, refs = references
    engine = engine_on(qtiny, kv_bits=bits, **config)
    run = Run(engine, prompt, KINDS[kind]())
    run_to_end(engine)
    assert run.answer == refs[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_among_others_joining_and_leaving(qtiny, references, bits, kind) -> None:
    prompt, refs = references
    rng = random.Random(2)
    engine = engine_on(qtiny, kv_bits=bits, max_concurrent=12, prefill_burst=16,
                       whole_prompt_tokens=0)
    others = start_others(engine, rng, 7)
    for _ in range(3):
        engine.step()
    target = Run(engine, prompt, KINDS[kind]())
    watch = Watch(engine, target)
    for _ in range(12):
        start_others(engine, rng, rng.randint(0, 2))
        watch.step(rng.randint(1, 3))
    watch.finish()
    assert len(set(watch.sizes) - {0}) >= 3, watch.sizes
    assert target.answer == refs[kind]
    assert all(o.stream.finish_reason == "length" for o in others)


def test_in_a_burst_prefilled_and_decoded_together(qtiny, references, bits) -> None:
    prompt, refs = references
    rng = random.Random(3)
    engine = engine_on(qtiny, kv_bits=bits, max_concurrent=32, max_token_budget=4096)
    start_others(engine, rng, 9, shortest=6)
    target = Run(engine, prompt, KINDS["seeded"]())
    start_others(engine, rng, 8, shortest=6)
    watch = Watch(engine, target)
    watch.finish()
    assert max(watch.sizes) == 18, watch.sizes
    assert target.answer == refs["seeded"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_prefix_cache_hit_and_a_next_turn(qtiny, references, bits, kind) -> None:
    prompt, refs = references
    rng = random.Random(6)
    engine = engine_on(qtiny, kv_bits=bits, max_concurrent=8)
    first = Run(engine, prompt, KINDS[kind]())
    run_to_end(engine)
    start_others(engine, rng, 3)
    engine.step()
    again = Run(engine, prompt, KINDS[kind]())
    run_to_end(engine)
    assert again.stream.stats.cached_tokens == len(prompt) - 1
    assert first.answer == again.answer == refs[kind]
    turn2 = prompt + list(first.answer.tokens) + [10, 20, 30, 40]
    nxt = Run(engine, turn2, KINDS[kind]())
    run_to_end(engine)
    assert nxt.stream.stats.cached_tokens >= len(prompt) + 15
    assert nxt.answer == reference(qtiny, turn2, KINDS[kind](), bits)


def test_several_answers_sharing_a_prompt(qtiny, references, bits) -> None:
    prompt, refs = references
    engine = engine_on(qtiny, kv_bits=bits, max_concurrent=4)
    lead = engine.submit(prompt_tokens=prompt, params=KINDS["greedy"]())
    runs = [Run.__new__(Run) for _ in range(2)]
    for r in runs:
        r.stream = engine.submit(prompt_tokens=prompt, params=KINDS["greedy"](),
                                 share_prompt_with=lead.request_id)
        r.events = []
        r.stream.listen(lambda e, r=r: r.events.append(e) if e.token is not None else None)
    run_to_end(engine)
    assert all(r.stream.stats.cached_tokens == len(prompt) - 1 for r in runs)
    assert [r.answer for r in runs] == [refs["greedy"]] * 2


def test_speculation_takes_back_refused_drafts(qtiny, bits) -> None:
    """n-gram drafts over a repetitive prompt: the KV of refused drafts is taken back and
    the answer is the one without speculation."""
    prompt = [7, 8, 9, 10, 11] * 12 + [7, 8]
    params = SamplingParams(max_tokens=24, logprobs=2)
    want = reference(qtiny, prompt, params, bits)
    engine = engine_on(qtiny, kv_bits=bits, speculative="ngram", max_concurrent=4)
    rng = random.Random(9)
    target = Run(engine, prompt, params)
    others = [Run(engine, other_prompt(rng, 30) * 2, SamplingParams(max_tokens=12))
              for _ in range(2)]
    run_to_end(engine)
    assert target.answer == want
    assert all(o.stream.finish_reason == "length" for o in others)
    assert engine.stats().drafted_tokens > 0


# -- KV files --------------------------------------------------------------------------------


def _metadata(path) -> dict:
    from engine.prefix_store import _read_metadata

    return _read_metadata(path)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_prefix_restored_from_a_quantized_file(qtiny, references, bits, kind,
                                                       tmp_path) -> None:
    prompt, refs = references
    saving = engine_on(qtiny, kv_bits=bits, kv_disk_dir=str(tmp_path))
    first = Run(saving, prompt, KINDS[kind]())
    run_to_end(saving)
    assert await saving.save_prefix(prompt_tokens=prompt) > 0
    await saving.shutdown()
    (path,) = tmp_path.glob("*.safetensors")
    meta = _metadata(path)
    assert meta["format"] == "batchchat-kv-2"
    assert meta["kv"] == {8: "q8g32", 4: "q4g32h"}[bits]  # head 32: groups of 32

    restarted = engine_on(qtiny, kv_bits=bits, kv_disk_dir=str(tmp_path), max_concurrent=4)
    start_others(restarted, random.Random(7), 2)
    again = Run(restarted, prompt, KINDS[kind]())
    run_to_end(restarted)
    assert restarted.stats().prefix_disk_loads == 1
    assert again.stream.stats.cached_tokens > 0
    assert first.answer == again.answer == refs[kind]


async def test_files_are_smaller_and_forms_do_not_mix(qtiny, tmp_path) -> None:
    """A float file (the format before kv bits, batchchat-kv-1 with no "kv" key, as older
    versions wrote it) still loads into a float engine and, packed as it loads, into a
    quantized one; a quantized file is smaller, and a float engine leaves it alone."""
    prompt = target_prompt()
    sizes = {}
    for bits in (None, 8, 4):
        folder = tmp_path / str(bits)
        engine = engine_on(qtiny, kv_bits=bits, kv_disk_dir=str(folder))
        Run(engine, prompt, KINDS["greedy"]())
        run_to_end(engine)
        assert await engine.save_prefix(prompt_tokens=prompt) > 0
        await engine.shutdown()
        (path,) = folder.glob("*.safetensors")
        sizes[bits] = path.stat().st_size
    assert sizes[8] * 3 < sizes[None] and sizes[4] < sizes[8]

    # the float file as the format before: batchchat-kv-1, no "kv" entry
    from mlx_lm.models.cache import load_prompt_cache, save_prompt_cache

    (old,) = (tmp_path / "None").glob("*.safetensors")
    cache, meta = load_prompt_cache(str(old), return_metadata=True)
    meta = {k: v for k, v in meta.items() if k != "kv"} | {"format": "batchchat-kv-1"}
    save_prompt_cache(str(old), cache, meta)
    assert "kv" not in _metadata(old)
    for bits in (None, 8):
        engine = engine_on(qtiny, kv_bits=bits, kv_disk_dir=str(tmp_path / "None"))
        run = Run(engine, prompt, KINDS["greedy"]())
        run_to_end(engine)
        assert engine.stats().prefix_disk_loads == 1, bits
        assert run.stream.stats.cached_tokens == len(prompt) - 1
        entry = testing.facts(engine).prefix_kv[0]
        want = mx.float32 if bits is None else mx.uint8
        assert all(layer.keys.dtype == want for layer in entry)
        await engine.shutdown()
    # a float engine does not read an 8-bit file (it would need the float KV)
    engine = engine_on(qtiny, kv_disk_dir=str(tmp_path / "8"))
    run = Run(engine, prompt, KINDS["greedy"]())
    run_to_end(engine)
    assert engine.stats().prefix_disk_loads == 0 and run.stream.stats.cached_tokens == 0
    assert list((tmp_path / "8").glob("*.safetensors"))  # left for an 8-bit engine


async def test_a_4_bit_file_from_before_the_turn_still_loads(qtiny, tmp_path) -> None:
    """A 4-bit file of the form before rows were turned (q4g32, mx.quantize of the rows
    themselves) loads into today's 4-bit engine (q4g32h): unpacked and packed again."""
    from mlx_lm.models.cache import load_prompt_cache, save_prompt_cache

    prompt = target_prompt()
    engine = engine_on(qtiny, kv_bits=4, kv_disk_dir=str(tmp_path))
    Run(engine, prompt, KINDS["greedy"]())
    run_to_end(engine)
    assert await engine.save_prefix(prompt_tokens=prompt) > 0
    await engine.shutdown()
    (path,) = tmp_path.glob("*.safetensors")
    new, old = KvPacking(4, 32, turned=True), KvPacking(4, 32)
    cache, meta = load_prompt_cache(str(path), return_metadata=True)
    assert meta["kv"] == new.tag == "q4g32h"
    for layer in cache:  # the same KV in the old form
        layer.keys, layer.values = old.pack(new.unpack(layer.keys)), old.pack(new.unpack(
            layer.values))
    save_prompt_cache(str(path), cache, meta | {"kv": "q4g32"})
    want = [new.pack(old.unpack(layer.keys)) for layer in cache]

    engine = engine_on(qtiny, kv_bits=4, kv_disk_dir=str(tmp_path))
    run = Run(engine, prompt, KINDS["greedy"]())
    run_to_end(engine)
    assert engine.stats().prefix_disk_loads == 1
    assert run.stream.stats.cached_tokens == len(prompt) - 1 and len(run.events) == 16
    entry = testing.facts(engine).prefix_kv[0]
    n = len(prompt) - 1
    for layer, rows in zip(entry, want, strict=True):
        assert mx.array_equal(layer.keys[..., :n, :], rows[..., :n, :]).item()
    await engine.shutdown()


def test_a_draft_model_keeps_its_kv_in_the_same_form(qtiny, references, bits,
                                                     tmp_path) -> None:
    """speculative="draft:PATH" (the target saved as its own draft model): the draft KV is
    packed as the target's, and the answer is the one without speculation at that setting."""
    from engine.draft_model import DraftModel
    from tests import tiny_model
    from tests.engine.conftest import drafting_pays

    prompt, refs = references
    path = tiny_model.save_mlx_dir(qtiny, tmp_path / "draft", {"group_size": 32, "bits": 4})
    engine = drafting_pays(engine_on(qtiny, kv_bits=bits, speculative=f"draft:{path}"))
    source = testing.facts(engine).draft_source
    assert isinstance(source, DraftModel)
    assert source.runner.packing == testing.facts(engine).kv_packing is not None
    assert all(isinstance(c, PackedLayer) for c in source.runner.view(engine_cache(qtiny)))
    run = Run(engine, prompt, greedy(logprobs=None))  # rows asking for log-probs don't draft
    run_to_end(engine)
    assert run.answer.tokens == refs["greedy"].tokens
    assert run.stream.stats.drafted_tokens > 0 and run.stream.stats.accepted_tokens > 0


# -- the KV budget ---------------------------------------------------------------------------


def test_the_budget_holds_about_twice_the_tokens_at_8_bits(qtiny) -> None:
    """One budget (an override), float against 8 bits: tokens a MiB and the requests the
    engine's counters admit at once (each sets aside prompt + max_tokens + one step)."""
    def running(bits):
        # room for 4 requests at float (30 + 20 + 256 positions each, 1 KiB a token)
        engine = engine_on(qtiny, kv_bits=bits, max_concurrent=16,
                           kv_budget_bytes=4 * 306 * 1024 + 1000)
        rng = random.Random(5)
        for _ in range(16):
            Run(engine, [rng.randrange(256) for _ in range(30)], SamplingParams(max_tokens=20))
        engine.step()
        engine.step()
        stats = engine.stats()
        most = stats.active
        run_to_end(engine)
        return stats, most

    f, f_running = running(None)
    q, q_running = running(8)
    assert f.kv_bits == 0 and q.kv_bits == 8
    assert q.kv_tokens_per_mib >= 2 * f.kv_tokens_per_mib
    assert q.kv_tokens_per_mib == (1 << 20) / q.kv_bytes_per_token
    assert f_running == 4 and q_running >= 8, (f_running, q_running)
    assert q.kv_reserved_bytes <= q.kv_budget_bytes == f.kv_budget_bytes

