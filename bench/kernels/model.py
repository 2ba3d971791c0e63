"""Solo decode tok/s of the bundled model: float32, MLX quantized, quantized on the kernel.

    python -m bench.kernels.model [--rounds 5] [--tokens 64]

mlx-lm's `stream_generate` (its generation_tps, prompt excluded) on one prompt, the three
variants interleaved round by round in one process (OpenBLAS preloaded), medians printed.
Also checks that the kernel's greedy tokens equal MLX's quantized path.
"""

from __future__ import annotations

import argparse
import statistics

from engine.preload import ensure_preloads


def main(argv: list[str] | None = None) -> None:
    ensure_preloads()
    parser = argparse.ArgumentParser(prog="python -m bench.kernels.model")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args(argv)

    from mlx_lm import stream_generate

    from engine import module_tree, native
    from engine.cpu_options import CpuOptions
    from engine.loader import load_model
    from engine.native import layers

    f32 = load_model("bundled", quantized=False)
    q = load_model("bundled", quantized=True)
    # the engine's own modules over q's arrays, with the kernel as issue #19 measured it
    # (float32 activations, up to 32 rows); q itself stays MLX's own quantized path
    qn = module_tree.clone(q.model)
    installed = layers.install(qn, CpuOptions(qmv_max_rows=32, int8=False, invariant=False))
    print(native.info(), f"| {installed} modules on the kernel")
    tok = q.tokenizer
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Explain what a CPU cache is, in detail."}],
        add_generation_prompt=True)

    def run(model) -> tuple[float, list[int]]:
        tokens, tps = [], 0.0
        for r in stream_generate(model, tok, prompt, max_tokens=args.tokens):
            tokens.append(r.token)
            tps = r.generation_tps
        return tps, tokens

    variants = {"float32 (OpenBLAS)": f32.model, "MLX quantized": q.model,
                "quantized, native kernel": qn}
    tps: dict[str, list[float]] = {k: [] for k in variants}
    toks: dict[str, list[int]] = {}
    for _ in range(args.rounds):
        for name, model in variants.items():
            t, toks[name] = run(model)
            tps[name].append(t)
    base = statistics.median(tps["float32 (OpenBLAS)"])
    print("| variant | solo decode tok/s (median) | vs float32 |\n|---|---|---|")
    for name, v in tps.items():
        med = statistics.median(v)
        print(f"| {name} | {med:.1f} | {med / base:.2f}x |")
    same = toks["quantized, native kernel"] == toks["MLX quantized"]
    print(f"greedy tokens, kernel vs MLX quantized: {'equal' if same else 'DIFFERENT'}"
          f" ({args.tokens} tokens)")


if __name__ == "__main__":
    main()
