"""Quantized KV on the path Metal and CUDA take (issue #54): no native extension, so the
rows are packed with mx.quantize (turned with mx.hadamard_transform at 4 bits) and given to
mlx-lm's attention dequantized (kv_quant.PackedLayer, fused=False). Run here on MLX's CPU
backend with the extension and the engine's CPU kernels off.

What must hold on every backend (docs/memory.md "KV bits"): it runs, at 8 and 4 bits, alone
and batched; the cache, the prefix cache and the disk files hold packed rows and the budget
counts them; a prefix restored from a file is the very rows saved. What is not asserted
here: that a reply's bits do not depend on its batch or chunking (the native kernels'
guarantee, tests/engine/test_kv_bits.py; mlx's own kernels make no such promise on a GPU).
"""

from __future__ import annotations

import random

import mlx.core as mx
import pytest

from engine import SamplingParams, testing
from engine import cache as kv
from engine.cpu_options import CpuOptions
from engine.kv_quant import KvPacking, PackedLayer
from tests.engine.conftest import engine_on, quantized_tiny, run_to_end
from tests.engine.test_same_answer import Run, greedy, start_others, target_prompt

PLAIN = dict(cpu=CpuOptions(native=False), cpu_kernels=False)


@pytest.fixture(scope="module")
def qtiny():
    return quantized_tiny(seed=11, hidden=128)  # head size 32


@pytest.mark.parametrize("bits", [8, 4])
def test_it_runs_packed_alone_and_batched(qtiny, bits) -> None:
    engine = engine_on(qtiny, kv_bits=bits, **PLAIN)
    now = testing.facts(engine)
    assert now.kv_packing == KvPacking.for_head(bits, 32) and not now.fused_kv
    assert now.compiled_traces is None  # no compiled step
    view = testing.internals(engine).runner.view  # the runner's own wrapping, called
    layers = view(kv.new_cache(now.module_tree))
    assert all(isinstance(c, PackedLayer) and not c.fused for c in layers)
    run = Run(engine, target_prompt(), greedy(logprobs=None))
    others = start_others(engine, random.Random(3), 4)
    run_to_end(engine)
    assert len(run.events) == 16 and run.stream.finish_reason == "length"
    assert all(o.stream.finish_reason == "length" for o in others)
    entry = testing.facts(engine).prefix_kv[0]
    assert all(layer.keys.dtype == mx.uint8 for layer in entry)
    # a next turn from the prefix cache
    again = Run(engine, target_prompt(), greedy(logprobs=None))
    run_to_end(engine)
    assert again.stream.stats.cached_tokens > 0 and len(again.events) == 16


def test_the_budget_counts_packed_rows(qtiny) -> None:
    float_stats = engine_on(qtiny, **PLAIN).stats()
    for bits in (8, 4):
        stats = engine_on(qtiny, kv_bits=bits, **PLAIN).stats()
        assert stats.kv_bits == bits
        assert stats.kv_bytes_per_token == float_stats.kv_bytes_per_token * (
            KvPacking.for_head(bits, 32).width(32)) // (32 * 4)
        assert stats.kv_tokens_per_mib >= 2 * float_stats.kv_tokens_per_mib
        assert stats.kv_budget_bytes == float_stats.kv_budget_bytes


@pytest.mark.parametrize("bits", [8, 4])
async def test_a_prefix_restored_from_a_file_is_the_rows_saved(qtiny, bits, tmp_path) -> None:
    prompt = target_prompt()
    saving = engine_on(qtiny, kv_bits=bits, kv_disk_dir=str(tmp_path), **PLAIN)
    Run(saving, prompt, SamplingParams(max_tokens=4))
    run_to_end(saving)
    saved = [layer.keys for layer in testing.facts(saving).prefix_kv[0]]
    assert await saving.save_prefix(prompt_tokens=prompt) > 0
    await saving.shutdown()

    restarted = engine_on(qtiny, kv_bits=bits, kv_disk_dir=str(tmp_path), **PLAIN)
    run = Run(restarted, prompt, greedy(logprobs=None))
    run_to_end(restarted)
    assert restarted.stats().prefix_disk_loads == 1
    n = run.stream.stats.cached_tokens
    assert n == len(prompt) - 1 and len(run.events) == 16
    entry = testing.facts(restarted).prefix_kv[0]
    for layer, keys in zip(entry, saved, strict=True):
        assert mx.array_equal(layer.keys[..., :n, :], keys[..., :n, :]).item()
    await restarted.shutdown()
