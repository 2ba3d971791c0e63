"""`python -m bench.arch_decode ARCH [--hidden 1024] [--layers 6] [--rows 1 8] [--repeat 3]
[--profile] [--ab] [--experts 32 --used 4]`: decode tok/s of one stream and of a batch on a
random-weight GGUF of one architecture (llama3: Llama 3.x's RoPE scaling with rope_freqs, qwen3,
gemma3, gemma2; the MoE ones qwen3moe and gpt-oss, `--experts` experts of which `--used` a
token, each expert's MLP half the hidden size wide), written the
way the tests' converter writes files (tests/gguf_models.py) with Q4_0 linears and a Q8_0
embedding, loaded by the engine's GGUF loader and run by its engine (its CPU kernels).

`--profile` prints, per module class of the engine's copy of the model, whether it is one of
the engine's own layers or a stock mlx / mlx-lm one, and one decode step's time per class.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T

from engine.preload import ensure_preloads
from tests.gguf_models import (
    CASES,
    LLAMA3_SCALING,
    ArchCase,
    build_model,
    gguf_tensors,
    llama3_rope_factors,
    quantize,
    write_gguf,
)

MOE = ("qwen3moe", "gpt-oss")


def arch_case(arch: str, hidden: int, layers: int, experts: int = 32, used: int = 4) -> ArchCase:
    """The architecture at a realistic width: heads of 64 (gemma3: 128), an MLP 2.75x
    as wide (a MoE's experts: `experts` MLPs half the hidden size wide, `used` a token)."""
    head = 128 if arch.startswith("gemma") else 64
    dims = dict(hidden_size=hidden, num_hidden_layers=layers, intermediate_size=hidden * 11 // 4
                // 32 * 32, num_attention_heads=hidden // head, num_key_value_heads=2,
                head_dim=head, max_position_embeddings=4096)
    if arch == "llama3":
        case = CASES["llama3"]
        scaling = {**LLAMA3_SCALING, "factor": 32.0, "original_max_position_embeddings": 8192}
        config = {**case.config, **dims, "rope_theta": 500000.0, "rope_scaling": scaling}
        extra = {"rope_freqs.weight": llama3_rope_factors(head, 500000.0, scaling)}
        return replace(case, config=config, extra=extra)
    case = CASES[arch]
    extra = {"query_pre_attn_scalar": head} if arch.startswith("gemma") else {}
    if arch == "qwen3moe":
        extra = {"num_experts": experts, "num_experts_per_tok": used,
                 "moe_intermediate_size": hidden // 2}
    if arch == "gpt-oss":  # its experts' width is intermediate_size; layers alternate
        extra = {"num_local_experts": experts, "num_experts_per_tok": used,
                 "intermediate_size": hidden // 2, "sliding_window": 128,
                 "layer_types": ["sliding_attention", "full_attention"] * (layers // 2)
                 + ["sliding_attention"] * (layers % 2)}
    return replace(case, config={**case.config, **dims, **extra})


def _types(name: str) -> T | None:
    return T.Q8_0 if name in ("token_embd.weight", "output.weight") else T.Q4_0


def write(arch: str, hidden: int, layers: int, folder: Path, experts: int = 32,
          used: int = 4) -> Path:
    case = arch_case(arch, hidden, layers, experts, used)
    tensors, raw = quantize(gguf_tensors(case, build_model(case, seed=1)), T.Q4_0, seed=3,
                            which=_types)
    return write_gguf(folder / f"{arch}.gguf", case, tensors, raw_types=raw)


def decode_rate(loaded, rows: int, tokens: int) -> tuple[float, float]:
    """Generated tokens per second over all rows, and the process's CPU milliseconds (all
    its threads) per generated token, prefill excluded (from every row's first token to the
    end). On a shared machine the CPU time is the steadier figure: it does not count the
    time other processes hold the cores."""
    from engine import Engine, EngineConfig, SamplingParams

    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=[],
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=max(rows, 1)))
    rng = np.random.default_rng(rows)
    firsts = [0] * rows
    for i in range(rows):
        stream = engine.submit(prompt_tokens=rng.integers(3, 250, 32).tolist(),
                               params=SamplingParams(max_tokens=tokens + 1))
        stream.listen(lambda e, i=i: firsts.__setitem__(i, 1) if e.token is not None else None)
    while not all(firsts):
        engine.step()
    start, cpu = time.perf_counter(), time.process_time()
    while engine.has_work():
        engine.step()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return rows * tokens / elapsed, cpu * 1e3 / (rows * tokens)


def profile(loaded) -> None:
    """Which module classes the engine's copy holds, and each class's share of a step."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from engine import cpu_kernels
    from engine.model_runner import ModelRunner

    runner = ModelRunner(loaded.model)
    model = runner.model
    classes: dict[str, int] = {}
    for _, m in model.named_modules():
        key = f"{type(m).__module__}.{type(m).__qualname__}"
        classes[key] = classes.get(key, 0) + 1
    for key, n in sorted(classes.items()):
        print(f"  {n:4d} x {key}")
    cache = make_prompt_cache(model)
    x = mx.array([[5]])
    with cpu_kernels.active(runner.cpu):
        mx.eval(model(mx.array([list(range(3, 40))]), cache=cache))
        times = []
        for _ in range(20):
            t = time.perf_counter()
            mx.eval(model(x, cache=cache))
            times.append(time.perf_counter() - t)
    print(f"  one decode step (1 row): {sorted(times)[10] * 1e3:.2f} ms")


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    p = argparse.ArgumentParser(prog="python -m bench.arch_decode", description=__doc__)
    p.add_argument("arch", choices=["llama3", "qwen3", "gemma3", "gemma2", *MOE])
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--experts", type=int, default=32)
    p.add_argument("--used", type=int, default=4)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--ab", action="store_true",
                   help="alternate (A B B A per repeat) the tree before engine/cpu_arch_layers.py "
                        "(A: its pieces on MLX's stock ops; for a MoE, its experts on mlx-lm's "
                        "gather_qmm, before engine/native/switch_layers.py) and this one (B), "
                        "in one build")
    args = p.parse_args(argv)
    from engine.loader import load_model

    try:
        from engine import cpu_arch_layers
    except ImportError:  # a tree from before it (an A/B across trees, one process each)
        cpu_arch_layers = types.SimpleNamespace(engine_class=None)
    if args.arch in MOE:  # A/B the experts only: the rest is the same native path in both
        try:
            from engine.native import switch_layers as target
        except ImportError:
            target = types.SimpleNamespace(engine_module=lambda mod, scalar: None)
        attr = "engine_module"
    else:
        target, attr = cpu_arch_layers, "engine_class"
    ours = getattr(target, attr)
    modes = {"before": lambda *a: None, "after": ours}
    with tempfile.TemporaryDirectory() as folder:
        loaded = load_model(str(write(args.arch, args.hidden, args.layers, Path(folder),
                                      args.experts, args.used)))
        if args.profile:
            profile(loaded)
        for rows in args.rows:
            order = ["before", "after", "after", "before"] if args.ab else ["after"]
            rates: dict[str, list[tuple[float, float]]] = {}
            for _ in range(args.repeat):
                for mode in order:
                    setattr(target, attr, modes[mode])
                    rates.setdefault(mode, []).append(decode_rate(loaded, rows, args.tokens))
            setattr(target, attr, ours)
            for mode, got in rates.items():
                tps, cpu = sorted(g[0] for g in got), sorted(g[1] for g in got)
                mid = len(got) // 2
                print(f"{args.arch} hidden {args.hidden} x {args.layers} layers, {rows} rows, "
                      f"{mode}: {tps[mid]:.1f} tok/s (min {tps[0]:.1f}, max {tps[-1]:.1f}); "
                      f"CPU {cpu[mid]:.2f} ms/token (min {cpu[0]:.2f}, max {cpu[-1]:.2f}); "
                      f"medians of {len(got)} runs", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
