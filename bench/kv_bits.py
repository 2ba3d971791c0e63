"""Quantized KV against float KV (issue #54): quality and decode speed on the bundled model.

    python -m bench.kv_bits [--tokens 4096] [--ctx 2048] [--chunk 256] [--llama-cpp DIR]

Quality: the repo's docs and README (bench/gguf_parity.default_text) tokenized, the first
`--tokens` cut into windows of `--ctx`, each fed through the engine's own passes
(ModelRunner: the native kernels, the window in chunks of `--chunk`, as a long chat's
prefill runs) with float KV and with EngineConfig.kv_bits 8 and 4; on each window's second
half (as llama-perplexity scores) KL(float || quantized) of the next-token distributions
and whether the top token is the same.

With `--llama-cpp DIR` (llama.cpp's binaries, docs/performance.md), the same for llama.cpp
on the same GGUF: llama-perplexity's --kl-divergence with `-ctk/-ctv q8_0` and `q4_0`
against its f16 cache (`-fa on`, which a quantized V cache needs), `--ctx` tokens a chunk,
two chunks, scored on each chunk's second half as llama-perplexity scores; `-t 2`.

Speed: decode ms a token of one sequence after a `--tokens` prompt (the compiled decode
step), the settings alternated 7 times, 16 steps each, medians.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from engine.preload import ensure_preloads

SETTINGS = (None, 8, 4)


def _log_softmax(x):
    import numpy as np

    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def engine_rows(loaded, tokens: list[int], ctx: int, chunk: int) -> list[dict]:
    """KL and top-1 of kv_bits 8 and 4 against float: `tokens` cut into windows of `ctx`
    (each a fresh cache, fed `chunk` at a time), scored on each window's second half as
    llama-perplexity scores."""
    import mlx.core as mx
    import numpy as np

    from engine import cache as kv
    from engine.model_runner import ModelRunner

    runners = {bits: ModelRunner(loaded.model, kv_bits=bits) for bits in SETTINGS}
    kls: dict = {bits: [] for bits in SETTINGS[1:]}
    same: dict = {bits: [] for bits in SETTINGS[1:]}
    for start in range(0, len(tokens) - ctx + 1, ctx):
        window = tokens[start:start + ctx]
        caches = {bits: kv.new_cache(runners[bits].model) for bits in SETTINGS}
        for at in range(0, ctx - 1, chunk):
            piece = window[at:min(at + chunk, ctx - 1)]
            logp = {}
            for bits in SETTINGS:
                out = runners[bits].verify(caches[bits], piece)
                mx.eval(out)
                logp[bits] = _log_softmax(np.array(out.astype(mx.float32)))
            scored = slice(max(0, ctx // 2 - at), None)  # positions from ctx / 2 on
            base = logp[None][scored]
            p = np.exp(base)
            for bits in SETTINGS[1:]:
                kls[bits] += list((p * (base - logp[bits][scored])).sum(-1))
                same[bits] += list(base.argmax(-1) == logp[bits][scored].argmax(-1))
    rows = []
    for bits in SETTINGS[1:]:
        k, s = np.array(kls[bits]), np.array(same[bits])
        packing = runners[bits].packing
        rows.append({"who": "engine", "kv": f"{bits}-bit, groups of {packing.group}",
                     "positions": len(k), "mean_kl": round(float(k.mean()), 6),
                     "max_kl": round(float(k.max()), 4), "top1": round(100 * float(s.mean()), 2),
                     "bytes_a_head_a_token": packing.width(64)})
    return rows


def decode_ms(loaded, tokens: list[int], chunk: int, rounds: int = 7) -> dict:
    """Decode ms a token of one sequence after `tokens` of prompt, at each setting: the
    settings alternated `rounds` times (16 steps each, taken back after), medians."""
    import mlx.core as mx

    from engine import cache as kv
    from engine.model_runner import ModelRunner

    runners = {bits: ModelRunner(loaded.model, kv_bits=bits) for bits in SETTINGS}
    caches = {bits: kv.new_cache(runners[bits].model) for bits in SETTINGS}
    for bits in SETTINGS:
        for at in range(0, len(tokens), chunk):
            runners[bits].prefill(caches[bits], tokens[at:at + chunk])
    times: dict = {bits: [] for bits in SETTINGS}
    for _ in range(rounds):
        for bits in SETTINGS:
            runner, cache = runners[bits], caches[bits]
            t = time.perf_counter()
            for _ in range(16):
                mx.eval(runner.decode(cache, [tokens[-1]]))
            times[bits].append((time.perf_counter() - t) / 16 * 1000)
            for layer in cache:
                layer.trim(16)
    return {"float" if bits is None else f"{bits}-bit": round(statistics.median(times[bits]), 2)
            for bits in SETTINGS}


def llama_rows(bin_dir: Path, gguf: Path, text: Path, ctx: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "f16.kld"
        common = [str(bin_dir / "llama-perplexity"), "-m", str(gguf), "-f", str(text),
                  "-c", str(ctx), "--chunks", "2", "-t", "2", "-fa", "on"]
        subprocess.run(common + ["--kl-divergence-base", str(base)], check=True,
                       capture_output=True)
        for kind in ("q8_0", "q4_0"):
            done = subprocess.run(common + ["-ctk", kind, "-ctv", kind, "--kl-divergence",
                                            "--kl-divergence-base", str(base)],
                                  check=True, capture_output=True, text=True)
            log = done.stdout + done.stderr
            kl = re.search(r"Mean\s+KLD:\s+([-\d.]+)", log)
            top = re.search(r"Same top p:\s+([\d.]+)", log)
            worst = re.search(r"Maximum KLD:\s+([-\d.]+)", log)
            rows.append({"who": "llama.cpp", "kv": f"{kind} (f16 base, -fa on)",
                         "positions": 2 * (ctx - 1 - ctx // 2),
                         "mean_kl": float(kl.group(1)) if kl else None,
                         "max_kl": float(worst.group(1)) if worst else None,
                         "top1": float(top.group(1)) if top else None})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kv_bits", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--llama-cpp", default=None, metavar="DIR")
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--no-speed", action="store_true")
    args = parser.parse_args(argv)
    ensure_preloads()
    from engine.loader import bundled_model_path, load_model

    from .gguf_parity import default_text

    loaded = load_model("bundled")
    text = default_text()
    tokens = loaded.tokenizer.encode(text)[:args.tokens]
    for row in engine_rows(loaded, tokens, args.ctx, args.chunk):
        print(json.dumps(row), flush=True)
    if not args.no_speed:
        for n in (256, args.ctx):
            print(json.dumps({"decode_ms_a_token_after": n,
                              **decode_ms(loaded, tokens[:n], args.chunk)}), flush=True)
    if args.llama_cpp:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text)
        for row in llama_rows(Path(args.llama_cpp), bundled_model_path(), Path(f.name),
                              args.ctx):
            print(json.dumps(row), flush=True)
        Path(f.name).unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
