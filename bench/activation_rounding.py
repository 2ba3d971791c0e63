"""How much of the engine's distance from llama.cpp is int8 activation rounding (issue #45):
the float32 model with llama.cpp's Q8_0 rounding of every linear's input emulated in MLX,
against llama.cpp and against the engine's own kernels.

    python -m bench.activation_rounding --llama-cpp DIR [--type Q8_0] [--ctx 512] [--chunks 4]

The bundled SmolLM2 is re-quantized to `--type`; llama-perplexity gives llama.cpp's
distributions (as bench.gguf_parity). Rows: the float32 model as it is; with each linear's
input rounded per 32 values with step max|x|/127 (the engine's scheme) and with that step
stored as fp16 (llama.cpp's Q8_0 block); then the engine. Columns: KL and top-1 against
llama.cpp, and top-1 against the engine. If the emulated rounding were what separates the two
implementations, its row would sit near 100 % against one of them; it sits as far from both
as float32 does, which is what a model chaotic under rounding gives.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from engine.preload import ensure_preloads

from .gguf_parity import default_text, engine_logits, kl_against, llama_logprobs


def _rounded(x, fp16_step: bool):
    import mlx.core as mx

    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // 32, 32)
    amax = mx.max(mx.abs(blocks), axis=-1, keepdims=True)
    q = mx.round(blocks * mx.where(amax > 0, 127.0 / amax, 0.0))  # to nearest even
    step = amax / 127.0
    if fp16_step:
        step = step.astype(mx.float16).astype(mx.float32)
    return (q * step).reshape(x.shape)


def emulated_logits(path: Path, chunks, rounding: str | None):
    """The float32 model's logits with every linear's input rounded as `rounding` says."""
    import mlx.core as mx
    import mlx.nn as nn
    import numpy as np

    from engine.loader import load_model

    model = load_model(str(path), quantized=False).model
    fp16 = rounding == "fp16 step"

    class Rounded(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def __call__(self, x):
            return self.inner(_rounded(x, fp16))

    if rounding is not None:
        for _, parent in list(model.named_modules()):
            for key, child in list(parent.children().items()):
                if isinstance(child, nn.Linear):
                    setattr(parent, key, Rounded(child))
        embed = model.model.embed_tokens
        head = embed.as_linear
        embed.as_linear = lambda x: head(_rounded(x, fp16))  # a tied lm_head
    first = chunks.shape[1] // 2
    out = [np.array(model(mx.array(c[None].tolist()))[0, first:-1].astype(mx.float32))
           for c in chunks]
    return np.stack(out)


def main() -> None:
    from engine.loader import bundled_model_path

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llama-cpp", required=True, help="directory of llama.cpp's binaries")
    p.add_argument("--type", default="Q8_0")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--chunks", type=int, default=4)
    args = p.parse_args()
    ensure_preloads()
    bin_dir = Path(args.llama_cpp)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        gguf = work / f"model-{args.type}.gguf"
        subprocess.run([str(bin_dir / "llama-quantize"), "--allow-requantize",
                        str(bundled_model_path(fetch=True)), str(gguf), args.type],
                       check=True, capture_output=True)
        text = work / "text.txt"
        text.write_text(default_text(), encoding="utf-8")
        _, tokens, base = llama_logprobs(bin_dir, gguf, text, args, work / "base.kld")
        engine, _ = engine_logits(gguf, tokens)
        n_vocab = min(engine.shape[-1], base.shape[-1])
        flat = base[..., :n_vocab].reshape(-1, n_vocab)
        engine = engine[..., :n_vocab].reshape(-1, n_vocab)
        rows = [("float32", None), ("float32, engine's rounding", "float step"),
                ("float32, llama.cpp's Q8_0 rounding", "fp16 step")]
        for name, rounding in rows:
            ours = emulated_logits(gguf, tokens, rounding)[..., :n_vocab].reshape(-1, n_vocab)
            kl, top1, _ = kl_against(flat, ours)
            print(json.dumps({"type": args.type, "model": name, "kl_vs_llama_cpp": round(kl, 6),
                              "top1_vs_llama_cpp": round(100 * top1, 2),
                              "top1_vs_engine": round(100 * float(
                                  (ours.argmax(-1) == engine.argmax(-1)).mean()), 2)}),
                  flush=True)
        kl, top1, _ = kl_against(flat, engine)
        print(json.dumps({"type": args.type, "model": "engine", "kl_vs_llama_cpp": round(kl, 6),
                          "top1_vs_llama_cpp": round(100 * top1, 2)}), flush=True)


if __name__ == "__main__":
    main()
