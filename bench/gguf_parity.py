"""GGUF files against llama.cpp on the same file and text (issue #45): the engine's
next-token distributions against llama.cpp's (mean KL divergence, top-1 agreement), per
quantization, and the load time of a 1.5B Q4_K_M against llama-server's.

    python -m bench.gguf_parity --llama-cpp DIR [--types Q4_K_M,Q5_K_M,Q6_K,IQ4_XS,Q8_0]
        [--source GGUF] [--text FILE] [--ctx 512] [--chunks 8] [--load-model GGUF]

DIR holds llama.cpp's binaries (llama-quantize, llama-perplexity, llama-server), built from
the llama-cpp-python sdist's vendored tree (docs/performance.md says how; never in CI).

KL: `--source` (default: the bundled SmolLM2 Q4_1) is re-quantized with `llama-quantize
--allow-requantize` to each type. For each file, `llama-perplexity --save-all-logits`
writes llama.cpp's log-probabilities over the text in chunks of `--ctx` tokens (scored on
each chunk's second half, as llama-perplexity scores); the engine runs the same tokens
through its own passes (its module copy: the native kernels, int8 activations, exactly what
a chat gets) and the KL(llama.cpp || engine) and top-1 agreement are computed as
llama-perplexity's --kl-divergence computes them (tools/perplexity/perplexity.cpp). For
scale, llama.cpp is also compared with itself on the same file: the same text in
micro-batches of 32 positions (`-ub 32`, its other kernel path) against whole chunks.

Load: `--load-model` (a GGUF, e.g. a 1.5B Q4_K_M made with llama.cpp's converter and
quantizer from random weights) is loaded by the engine (load_model + ModelRunner: the
native kernels' packed copy included) and by llama-server (until /health answers), each
`--repeats` times alternated; medians and the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from engine.preload import ensure_preloads

TYPES = ("Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS", "Q8_0")
SELF_UBATCH = 32
REPO = Path(__file__).resolve().parents[1]


def default_text() -> str:
    """Prose and code that is the project's own (no download): its docs and README."""
    parts = [(REPO / "README.md").read_text(encoding="utf-8")]
    parts += [p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md"))]
    return "\n\n".join(parts)


def read_llama_logprobs(path: Path):
    """llama-perplexity's --save-all-logits file: n_ctx, n_vocab, n_chunk, the tokens, and
    per chunk the scored positions' log-probabilities (uint16 with a scale and a minimum a
    row: perplexity.cpp's log_softmax)."""
    import numpy as np

    raw = path.read_bytes()
    assert raw[:8] == b"_logits_", "not a llama-perplexity logits file"
    n_ctx, n_vocab, n_chunk = struct.unpack_from("<iii", raw, 8)
    pos = 20
    tokens = np.frombuffer(raw, dtype=np.int32, count=n_ctx * n_chunk, offset=pos)
    pos += 4 * n_ctx * n_chunk
    nv = 2 * ((n_vocab + 1) // 2) + 4
    rows = n_ctx - 1 - n_ctx // 2
    data = np.frombuffer(raw, dtype=np.uint16, offset=pos).reshape(n_chunk, rows, nv)
    head = data[..., :4].copy().view(np.float32)  # scale, min log-prob
    logp = head[..., 0:1] * data[..., 4:4 + n_vocab].astype(np.float32) + head[..., 1:2]
    return n_ctx, tokens.reshape(n_chunk, n_ctx), logp


def kl_against(base_logp, ours_logits) -> tuple[float, float, float]:
    """(mean KL(base || ours), top-1 agreement, max KL) over rows, as perplexity.cpp sums
    them (base terms below -16 left out)."""
    import numpy as np

    ours = ours_logits.astype(np.float64)
    ours = ours - ours.max(-1, keepdims=True)
    ours = ours - np.log(np.exp(ours).sum(-1, keepdims=True))
    base = base_logp.astype(np.float64)
    keep = base > -16
    kl = np.where(keep, np.exp(base) * (base - ours), 0.0).sum(-1)
    same = (ours.argmax(-1) == base.argmax(-1)).mean()
    return float(kl.mean()), float(same), float(kl.max())


def engine_logits(path: Path, chunks, exact: bool = False) -> object:
    """The engine's logits for each chunk's scored positions (its own passes); `exact`: the
    weights dequantized to float32 and MLX's own ops, no int8 rounding of the activations
    (the arithmetic llama.cpp's quantized dot products approximate)."""
    import mlx.core as mx
    import numpy as np

    from engine.loader import load_model
    from engine.model_runner import ModelRunner

    lm = load_model(str(path), quantized=False if exact else None)
    runner = None if exact else ModelRunner(lm.model)
    out = []
    first = chunks.shape[1] // 2
    for chunk in chunks:
        x = mx.array(chunk[None].tolist())
        if runner is None:
            logits = lm.model(x)
        else:
            with runner._kernels():
                logits = runner.model(x)
        out.append(np.array(logits[0, first:-1].astype(mx.float32)))
    return np.stack(out), lm.description


def llama_logprobs(bin_dir: Path, gguf: Path, text: Path, args: argparse.Namespace,
                   out: Path, extra: tuple[str, ...] = ()):
    """llama-perplexity's scored log-probabilities of `gguf` over `text` (its chunks)."""
    subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(gguf), "-f", str(text),
                    "-c", str(args.ctx), "--chunks", str(args.chunks), "-t", "2", *extra,
                    "--save-all-logits", str(out)], check=True, capture_output=True)
    return read_llama_logprobs(out)


def run_kl(args: argparse.Namespace, bin_dir: Path, work: Path) -> list[dict]:
    from engine.loader import bundled_model_path

    source = Path(args.source) if args.source else bundled_model_path(fetch=True)
    text = work / "text.txt"
    text.write_text(Path(args.text).read_text(encoding="utf-8") if args.text
                    else default_text(), encoding="utf-8")
    rows = []
    for kind in args.types.split(","):
        gguf = work / f"{source.stem}-{kind}.gguf"
        if kind.upper() in source.stem.upper():
            gguf = source
        else:
            subprocess.run([str(bin_dir / "llama-quantize"), "--allow-requantize", str(source),
                            str(gguf), kind], check=True, capture_output=True)
        base = work / f"{kind}.kld"
        _, tokens, base_logp = llama_logprobs(bin_dir, gguf, text, args, base)
        # llama.cpp against itself: the same file and text in micro-batches of 32 positions
        # instead of the whole chunk (its other kernel path; a server decodes that way)
        _, _, self_logp = llama_logprobs(bin_dir, gguf, text, args, work / f"{kind}-ub.kld",
                                         ("-ub", str(SELF_UBATCH)))
        ours, description = engine_logits(gguf, tokens)
        exact, _ = engine_logits(gguf, tokens, exact=True)
        n_vocab = min(ours.shape[-1], base_logp.shape[-1])
        flat = base_logp[..., :n_vocab].reshape(-1, n_vocab)
        kl, top1, worst = kl_against(flat, ours[..., :n_vocab].reshape(-1, n_vocab))
        kl_x, top1_x, _ = kl_against(flat, exact[..., :n_vocab].reshape(-1, n_vocab))
        kl_s, top1_s, _ = kl_against(flat, self_logp[..., :n_vocab].reshape(-1, n_vocab))
        row = {"type": kind, "file_mib": round(gguf.stat().st_size / 2**20, 1),
               "positions": int(base_logp.shape[0] * base_logp.shape[1]),
               "mean_kl": round(kl, 6), "max_kl": round(worst, 4),
               "top1": round(100 * top1, 2),
               # the same file in float32 arithmetic against llama.cpp, and the engine
               # against it: how much of the difference is activation rounding
               "exact_kl": round(kl_x, 6), "exact_top1": round(100 * top1_x, 2),
               "engine_vs_exact_top1": round(100 * float(
                   (ours.argmax(-1) == exact.argmax(-1)).mean()), 2),
               f"llama_ub{SELF_UBATCH}_kl": round(kl_s, 6),
               f"llama_ub{SELF_UBATCH}_top1": round(100 * top1_s, 2),
               "engine": description}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def _engine_load_s(path: Path) -> float:
    code = ("import time, sys; t = time.perf_counter();"
            "from engine.loader import load_model; from engine.model_runner import ModelRunner;"
            "lm = load_model(sys.argv[1]); ModelRunner(lm.model);"
            "print(time.perf_counter() - t)")
    import sys

    out = subprocess.run([sys.executable, "-c", code, str(path)], check=True,
                         capture_output=True, text=True, cwd=REPO)
    return float(out.stdout.strip().splitlines()[-1])


def _server_load_s(bin_dir: Path, path: Path, port: int = 18111) -> float:
    t = time.perf_counter()
    proc = subprocess.Popen([str(bin_dir / "llama-server"), "-m", str(path), "-t", "2",
                             "--poll", "0", "-c", "4096", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if r.status == 200:
                        return time.perf_counter() - t
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError("llama-server exited")
            time.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(10)


def run_load(args: argparse.Namespace, bin_dir: Path) -> dict:
    path = Path(args.load_model)
    ours, theirs = [], []
    for _ in range(args.repeats):  # A B A B: the page cache warm for both after the first
        ours.append(_engine_load_s(path))
        theirs.append(_server_load_s(bin_dir, path))
    row = {"file": path.name, "file_mib": round(path.stat().st_size / 2**20),
           "engine_s": [round(x, 2) for x in ours], "llama_server_s": [round(x, 2) for x in theirs],
           "engine_median_s": round(statistics.median(ours), 2),
           "llama_server_median_s": round(statistics.median(theirs), 2),
           "ratio": round(statistics.median(ours) / statistics.median(theirs), 2)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llama-cpp", required=True, help="directory of llama.cpp's binaries")
    p.add_argument("--types", default=",".join(TYPES))
    p.add_argument("--source", default=None, help="GGUF to requantize (default: bundled)")
    p.add_argument("--text", default=None, help="text file (default: the repo's docs)")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--chunks", type=int, default=8)
    p.add_argument("--load-model", default=None, help="GGUF whose load time to compare")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip-kl", action="store_true")
    args = p.parse_args()
    ensure_preloads()
    bin_dir = Path(args.llama_cpp)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_kl:
            rows = run_kl(args, bin_dir, Path(tmp))
            worst = min(r["top1"] for r in rows)
            print(f"top-1 agreement >= 99% for every type: {'yes' if worst >= 99 else 'no'} "
                  f"(lowest {worst}%)")
            own = min(r[f"llama_ub{SELF_UBATCH}_top1"] for r in rows)
            print(f"llama.cpp against itself (micro-batch {SELF_UBATCH} vs {args.ctx}): "
                  f"lowest top-1 {own}%")
        if args.load_model:
            row = run_load(args, bin_dir)
            print(f"load within 2x llama-server's: {'yes' if row['ratio'] <= 2 else 'no'}")


if __name__ == "__main__":
    main()
