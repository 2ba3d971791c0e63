"""engine.native.layers: a quantized model's linears on quantized_matvec (issue #19), in the
engine's own copy of the model's modules.

Greedy tokens must equal MLX's own quantized path (mx.quantized_matmul) on the same weights.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from mlx.utils import tree_flatten

from engine import module_tree, native, testing
from engine.cpu_options import ALL_ROWS, CpuOptions
from engine.native import layers
from tests.engine.conftest import reference_tokens
from tests.tiny_model import make_tiny_model

pytestmark = pytest.mark.usefixtures("native_built")


@pytest.fixture()
def tiny_q():
    tiny = make_tiny_model(seed=3, hidden=128)
    nn.quantize(tiny.model, group_size=32, bits=4)
    mx.eval(tiny.model.parameters())
    return tiny.model


def native_tree(model: nn.Module, **options) -> nn.Module:
    """The engine's copy of `model` with the native linears (float32 activations, the row
    limit given: the size-dependent paths of BATCHCHAT_INVARIANT=0 unless asked)."""
    tree = module_tree.clone(model)
    layers.install(tree, CpuOptions(**({"int8": False, "invariant": False} | options)))
    return tree


def test_install_replaces_every_quantized_linear_in_the_copy_only(tiny_q) -> None:
    n_quant = sum(isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding))
                  for _, m in tiny_q.named_modules())
    stock_types = [type(m) for _, m in tiny_q.named_modules()]
    tree = module_tree.clone(tiny_q)
    assert layers.install(tree, CpuOptions(qmv_max_rows=8)) == n_quant
    assert all(type(m) is not nn.QuantizedLinear for _, m in tree.named_modules())
    # the loaded model is untouched, and the copy holds the same arrays under the same names
    assert [type(m) for _, m in tiny_q.named_modules()] == stock_types
    ours, theirs = tree_flatten(tree.parameters()), tree_flatten(tiny_q.parameters())
    assert [n for n, _ in ours] == [n for n, _ in theirs]
    assert all(a is b for (_, a), (_, b) in zip(ours, theirs, strict=True))
    assert layers.install(tree, CpuOptions(qmv=False)) == 0  # BATCHCHAT_NATIVE_QMV=0


def _siblings_in_one_call(monkeypatch, attn, x, op: str, apart: list) -> None:
    """q, k and v of `attn` called on `x` make one call of the extension's `op`, and give
    the outputs `apart` (each computed alone), bit for bit."""
    calls: list[int] = []
    many = getattr(layers.extension(), op)
    ext = type("Ext", (), {op: staticmethod(lambda *a, **k: calls.append(1) or many(*a, **k))})
    monkeypatch.setattr(layers, "extension", lambda: ext)
    together = [attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)]
    assert calls == [1]  # one op for the three
    for a, b in zip(apart, together, strict=True):
        assert np.array_equal(np.array(a), np.array(b))


def test_sibling_projections_share_one_op_with_the_same_results(tiny_q, monkeypatch) -> None:
    tree = native_tree(tiny_q, qmv_max_rows=8)
    attn = tree.model.layers[0].self_attn
    mlp = tree.model.layers[0].mlp
    assert attn.q_proj._group.members == (attn.q_proj, attn.k_proj, attn.v_proj)
    assert mlp.gate_proj._group.members == (mlp.gate_proj, mlp.up_proj)
    x = mx.random.normal((2, 1, 128))
    apart = [native.quantized_matvec(x, m.weight, m.scales, m.biases, 32, 4)
             for m in (attn.q_proj, attn.k_proj, attn.v_proj)]
    _siblings_in_one_call(monkeypatch, attn, x, "quantized_matvec_many", apart)
    # a follower given another input computes its own (the leader's result is not reused)
    y = mx.random.normal((2, 1, 128))
    attn.q_proj(x)
    want = native.quantized_matvec(y, attn.k_proj.weight, attn.k_proj.scales,
                                   attn.k_proj.biases, 32, 4)
    assert np.array_equal(np.array(attn.k_proj(y)), np.array(want))
    assert np.array_equal(np.array(attn.v_proj(x)), np.array(apart[2]))


def test_siblings_of_other_layouts_share_one_packed_op_with_their_own_bits(monkeypatch) -> None:
    """A Q4_K_M file keeps some layers' v in Q6_K beside q and k in Q4_K: on the packed
    kernel (the engine's default) the three still run as one op, each read in its own
    layout, each output the bits of its own call."""
    tiny = make_tiny_model(seed=4, hidden=128)
    nn.quantize(tiny.model, group_size=64, bits=8,
                class_predicate=lambda path, m: path.endswith("v_proj"))
    nn.quantize(tiny.model, group_size=32, bits=4)
    mx.eval(tiny.model.parameters())
    tree = module_tree.clone(tiny.model)
    layers.install(tree, CpuOptions())
    attn = tree.model.layers[0].self_attn
    assert (attn.v_proj.group_size, attn.v_proj.bits) == (64, 8) != (
        attn.q_proj.group_size, attn.q_proj.bits)
    assert attn.q_proj._group.members == (attn.q_proj, attn.k_proj, attn.v_proj)
    assert attn.q_proj._group.layouts  # each weight's own layout
    x = mx.random.normal((3, 1, 128))
    apart = [native.packed_matvec_many(x, [m._native_packed], [m._native_n], *m._packed_layout)[0]
             for m in (attn.q_proj, attn.k_proj, attn.v_proj)]
    _siblings_in_one_call(monkeypatch, attn, x, "packed_matvec_many", apart)


@pytest.mark.parametrize("shape", [(3, 1), (1, 5), (2, 40)], ids=["decode3", "rows5", "prefill"])
def test_logits_match_mlx_quantized_path(tiny_q, shape) -> None:
    """Up to 8 rows go through the kernel, the 80-row pass through dequantize + matmul."""
    tokens = mx.array(np.random.default_rng(0).integers(0, 250, size=shape))
    ref = tiny_q(tokens)
    out = native_tree(tiny_q, qmv_max_rows=8)(tokens)
    assert out.shape == ref.shape
    assert np.allclose(np.array(out), np.array(ref), rtol=1e-4, atol=1e-4)
    assert mx.array_equal(tiny_q(tokens), ref).item()  # the loaded model: MLX's own path


def test_float32_copies_serve_large_batches_without_dequantizing(tiny_q, monkeypatch) -> None:
    tokens = mx.array(np.random.default_rng(1).integers(0, 250, size=(2, 40)))
    ref = tiny_q(tokens)
    tree = native_tree(tiny_q, qmv_max_rows=8, float32_copies=True)
    assert "_native_f32" not in dict(tree.parameters())  # not a parameter: never saved
    monkeypatch.setattr(layers, "dequantize_f32",
                        lambda *a, **k: pytest.fail("dequantized per call despite the copy"))
    out = tree(tokens)
    assert np.allclose(np.array(out), np.array(ref), rtol=1e-4, atol=1e-4)
    small = tree(tokens[:1, :4])  # 4 rows: still the kernel
    assert np.allclose(np.array(small), np.array(ref[:1, :4]), rtol=1e-4, atol=1e-4)
    assert all(getattr(m, "_native_f32", None) is None for _, m in tiny_q.named_modules())


def test_greedy_tokens_match_mlx_quantized_path(tiny_q) -> None:
    prompts = [[5, 17, 99, 3], [200, 1, 1, 42, 7, 8, 9, 10, 11, 12, 13]]
    ref = [reference_tokens(tiny_q, p, 24) for p in prompts]
    tree = native_tree(tiny_q, qmv_max_rows=32)
    assert [reference_tokens(tree, p, 24) for p in prompts] == ref


def test_row_limit_follows_the_options() -> None:
    # on by default, for every row count (batch invariance, engine/determinism.py)
    assert CpuOptions().qmv_rows() == CpuOptions(int8=False).qmv_rows() == ALL_ROWS
    assert CpuOptions(qmv=False).qmv_rows() == 0 == CpuOptions(native=False).qmv_rows()
    # BATCHCHAT_INVARIANT=0: the size-dependent choice of before
    assert CpuOptions(invariant=False, int8=False).qmv_rows() == 32
    assert CpuOptions(invariant=False).qmv_rows() == 64  # int8 activations
    assert CpuOptions(qmv_max_rows=12).qmv_rows() == 12
    assert CpuOptions(qmv_max_rows=12, invariant=False).qmv_rows() == 12


def test_cpu_default_keeps_weights_quantized_unless_switched_off() -> None:
    from engine.loader.common import resolve_quantized

    assert resolve_quantized(None, CpuOptions()) is True  # the kernel is built (fixture)
    assert resolve_quantized(None, CpuOptions(qmv=False)) is False  # float32 + OpenBLAS
    assert resolve_quantized(None, CpuOptions(native=False)) is False
    assert resolve_quantized(True, CpuOptions(qmv=False)) is True
    assert resolve_quantized(False, CpuOptions()) is False


@pytest.mark.bundled
def test_bundled_greedy_equals_mlx_quantized_path(mlx_lm_greedy) -> None:
    from engine.loader import load_model
    from tests.mlx_reference import greedy_tokens

    lm = load_model("bundled", quantized=True)
    questions = ["What is the capital of France?", "Write a haiku about the sea.",
                 "List three prime numbers.", "Explain what a CPU cache is in one sentence."]
    prompts = [lm.tokenizer.apply_chat_template([{"role": "user", "content": q}],
                                                add_generation_prompt=True) for q in questions]

    def greedy(p: list[int]) -> list[int]:
        return greedy_tokens(lm.model, lm.tokenizer, p, 24)

    # MLX's quantized path on the freshly loaded model (kept for the session: the golden
    # tests ask for the same replies)
    ref = mlx_lm_greedy.greedy(lm.model, lm.tokenizer, prompts, 24)
    tree = module_tree.clone(lm.model)
    options = CpuOptions(qmv_max_rows=32, int8=False, invariant=False)
    assert layers.install(tree, options) == 211  # 30 layers x 7 linears + the tied lm_head
    stock = lm.model
    lm.model = tree
    assert [greedy(p) for p in prompts] == ref
    lm.model = stock
    assert [greedy(p) for p in prompts] == ref  # the loaded model: still MLX's own path
    assert native.available()


@pytest.mark.bundled
def test_bundled_engine_batch_with_switch_equals_mlx_quantized_path(mlx_lm_greedy) -> None:
    """By default on the CPU the loader keeps weights quantized, ModelRunner installs the
    kernel, and a batch of 4 (padded batched decode) gives MLX's quantized greedy tokens."""
    from engine import Engine, EngineConfig, SamplingParams
    from engine.loader import load_model
    from tests.engine.conftest import run_to_end

    config = EngineConfig(max_concurrent=8,
                          cpu=CpuOptions(int8=False))  # exact activations (int8: below)
    lm = load_model("bundled", cpu=config.cpu)
    engine = Engine(lm.model, lm.tokenizer, eos_token_ids=lm.eos_token_ids,
                    context_length=lm.context_length, config=config)
    tree = testing.facts(engine).module_tree
    assert type(tree.model.layers[0].mlp.gate_proj) is layers.NativeQuantizedLinear
    assert type(lm.model.model.layers[0].mlp.gate_proj) is nn.QuantizedLinear  # untouched
    questions = ["What is the capital of France?", "Write a haiku about the sea.",
                 "List three prime numbers.", "Explain what a CPU cache is in one sentence."]
    streams = [engine.submit(messages=[{"role": "user", "content": q}],
                             params=SamplingParams(max_tokens=24)) for q in questions]
    run_to_end(engine)
    # the reference: MLX's own quantized path, on the loaded model the engine left as it was
    # (its weights are part of the reference's key)
    refs = mlx_lm_greedy.greedy(lm.model, lm.tokenizer, [s.prompt_tokens for s in streams], 24)
    for s, ref in zip(streams, refs, strict=True):
        assert s.tokens == ref[:len(s.tokens)], s.text


@pytest.mark.bundled
def test_bundled_int8_default_differs_only_at_near_ties() -> None:
    """The CPU default (int8 activations) against exact float32 activations, teacher-forced
    on the exact path's greedy tokens so one flip does not derail the rest: 8 chat prompts x
    48 steps through the engine's decode. Measured: 97 % of steps pick the same token; the
    rounding moves a step's logits by up to ~0.6 (the median of each step's largest change;
    the logits themselves are ~20-30), and every flip was between two tokens whose exact
    logits were closer than that (0.0-0.34): a near-tie that the rounding can tip either
    way, as llama.cpp's own int8 activations do."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from engine.loader import load_model
    from engine.model_runner import ModelRunner

    lm = load_model("bundled", cpu=CpuOptions())
    runner = ModelRunner(lm.model, cpu=CpuOptions())
    linears = [m for _, m in runner.model.named_modules() if hasattr(m, "_native_int8")]
    assert len(linears) == 211 and all(m._native_int8 for m in linears)  # the default

    def int8(on: bool) -> None:
        for m in linears:
            object.__setattr__(m, "_native_int8", on)

    questions = ["What is the capital of France?", "Write a haiku about the sea.",
                 "List three prime numbers.", "Explain what a CPU cache is in one sentence.",
                 "Tell me a short story about a dragon.", "How do I reverse a list in Python?",
                 "What is 17 times 23?", "Translate 'good morning' into French."]
    steps = same = 0
    gaps, moves = [], []
    for q in questions:
        prompt = lm.tokenizer.apply_chat_template([{"role": "user", "content": q}],
                                                  add_generation_prompt=True)
        exact, rounded = make_prompt_cache(lm.model), make_prompt_cache(lm.model)
        int8(False)  # prompts under 64 tokens go through the kernel too
        token = int(mx.argmax(runner.prefill(exact, prompt, logits=True)[0]))
        int8(True)
        runner.prefill(rounded, prompt)
        for _ in range(48):
            int8(False)
            a = runner.decode(exact, [token])[0]
            int8(True)
            b = runner.decode(rounded, [token])[0]
            pick_a, pick_b = int(mx.argmax(a)), int(mx.argmax(b))
            steps += 1
            same += pick_a == pick_b
            moves.append(mx.max(mx.abs(a - b)).item())
            if pick_a != pick_b:
                gaps.append((a[pick_a] - a[pick_b]).item())
            token = pick_a
            if token in lm.eos_token_ids:
                break
    assert same / steps >= 0.93, f"{same}/{steps} steps agree"
    typical = sorted(moves)[len(moves) // 2]
    assert typical < 1.5, f"int8 rounding moves the logits by {typical:.2f} (median)"
    assert all(g <= typical for g in gaps), f"flips at exact gaps {gaps}, typical {typical}"
