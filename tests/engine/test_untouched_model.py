"""The engine runs its kernels in its own copy of the model's modules: after it loads a model,
mlx / mlx-lm's classes, mlx-lm's module functions and the loaded model itself are as they
were, so mlx-lm's own generators on that model are an independent reference (issue #27
item 5)."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import mlx_lm.models.base as mlx_lm_base
import pytest
from mlx.utils import tree_flatten
from mlx_lm.models import activations, llama

from engine import SamplingParams, native, testing
from engine.cpu_options import CpuOptions
from engine.native import layers
from engine.sampling import batched_draw
from tests.engine.conftest import engine_on, prompts, quantized_tiny, reference_tokens, run_to_end

pytestmark = pytest.mark.usefixtures("native_built")

CLASSES = (nn.QuantizedLinear, nn.QuantizedEmbedding, nn.RoPE, nn.RMSNorm, nn.Linear,
           nn.Embedding, llama.Attention, llama.MLP, llama.TransformerBlock, llama.Model)


def _snapshot() -> dict[str, object]:
    out: dict[str, object] = {f"{c.__module__}.{c.__qualname__}.{k}": v
                              for c in CLASSES for k, v in vars(c).items()}
    out |= {f"llama.{k}": v for k, v in vars(llama).items()}
    out |= {"base.sdpa": mlx_lm_base.scaled_dot_product_attention,
            "activations.swiglu": activations.swiglu}
    return out


def test_loading_an_engine_leaves_mlx_and_mlx_lm_and_the_model_as_they_were() -> None:
    before = _snapshot()
    tiny = quantized_tiny(seed=11)
    types = [(name, type(m)) for name, m in tiny.model.named_modules()]
    params = tree_flatten(tiny.model.parameters())
    x = mx.array([[5, 17, 99, 3, 42]])
    logits = tiny.model(x)
    mx.eval(logits)

    engine = engine_on(tiny, max_concurrent=4)
    stream = engine.submit(prompt_tokens=[1, 2, 3], params=SamplingParams(max_tokens=6))
    run_to_end(engine)
    assert len(stream.tokens) == 6

    assert _snapshot() == before  # no class re-classed or patched, no function swapped
    assert llama.swiglu is activations.swiglu
    assert llama.scaled_dot_product_attention is mlx_lm_base.scaled_dot_product_attention
    assert nn.QuantizedLinear.__call__ is before["mlx.nn.layers.quantized.QuantizedLinear.__call__"]
    assert [(name, type(m)) for name, m in tiny.model.named_modules()] == types
    assert engine.model is tiny.model
    assert all(a is b for (_, a), (_, b) in
               zip(tree_flatten(tiny.model.parameters()), params, strict=True))
    assert mx.array_equal(tiny.model(x), logits).item()  # bit for bit MLX's own path

    # the engine's own copy holds the kernels, over the same arrays under the same names
    tree = testing.facts(engine).module_tree
    assert tree is not tiny.model
    assert any(type(m) is layers.NativeQuantizedLinear for _, m in tree.named_modules())
    ours = tree_flatten(tree.parameters())
    assert [n for n, _ in ours] == [n for n, _ in params]
    assert all(a is b for (_, a), (_, b) in zip(ours, params, strict=True))


def test_mlx_lm_generate_on_the_loaded_model_gives_the_engines_greedy_tokens() -> None:
    """Exact float32 activations (the int8 default may tip near-ties: test_native_model)."""
    tiny = quantized_tiny(seed=12)
    engine = engine_on(tiny, max_concurrent=4, cpu=CpuOptions(int8=False))
    batch = prompts(4, seed=3)
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(max_tokens=10))
               for p in batch]
    run_to_end(engine)
    assert [s.tokens for s in streams] == [reference_tokens(tiny.model, p, 10) for p in batch]


def test_without_native_the_engine_uses_no_native_op(monkeypatch) -> None:
    """BATCHCHAT_NO_NATIVE=1: MLX's own CPU ops everywhere, float32 weights from the loader."""
    for name in ("quantized_matvec", "quantized_matvec_many", "packed_matvec_many",
                 "cache_attention", "rope", "rms_norm", "silu_mul", "sample_tokens",
                 "kv_write", "extension"):
        monkeypatch.setattr(native, name, lambda *a, _n=name, **k: pytest.fail(f"{_n} used"))
    tiny = quantized_tiny(seed=13)
    engine = engine_on(tiny, max_concurrent=4, cpu=CpuOptions(native=False))
    now = testing.facts(engine)
    assert not any(type(m).__module__ == layers.__name__
                   for _, m in now.module_tree.named_modules())
    assert now.compiled_traces is None and not now.ragged
    streams = [engine.submit(prompt_tokens=p, params=SamplingParams(
        max_tokens=5, temperature=0.8, seed=i)) for i, p in enumerate(prompts(3, seed=4))]
    run_to_end(engine)
    assert all(len(s.tokens) == 5 for s in streams)  # sampled by mlx-lm's sampler
    assert not batched_draw(engine.config.cpu)
