"""Phi-3.5's LongRoPE against transformers' Phi3ForCausalLM on the same random weights.

    python -m bench.longrope_transformers --converter-python PY [--original 4096,16]

The tiny phi3-longrope case of tests/gguf_models.py (its original context set to each
--original value), saved as its Hugging Face checkpoint and as the tiny writer's GGUF (held
to llama.cpp's converter by test_gguf_converter_parity). transformers picks the factor set
by each forward's length (short up to the original, long past it); the engine by its
context per sequence (engine/longrope.py). For a prompt within the original and one past
it, transformers' logits (float32, eager attention, run by PY: a Python with torch and
transformers) against: the engine's copy (native kernels) made for a context within the
original (short) and past it (long), and mlx-lm's stock model (long factors always). Per
row: mean KL(transformers || other), top-1 agreement, max |Δ logit| / max |logit|.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from engine.preload import ensure_preloads

RUN = """
import json, sys
import numpy as np
import torch
from transformers import Phi3ForCausalLM
model = Phi3ForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32,
                                        attn_implementation="eager",
                                        pad_token_id=2).eval()
out = {}
for name, ids in json.loads(sys.argv[2]).items():
    with torch.no_grad():
        out[name] = model(torch.tensor([ids])).logits[0].numpy()
np.savez(sys.argv[3], **out)
"""


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def compare(ref: np.ndarray, got: np.ndarray) -> dict[str, float]:
    p, q = _log_softmax(ref), _log_softmax(got)
    kl = (np.exp(p) * (p - q)).sum(-1)
    return {"kl": float(f"{kl.mean():.3g}"),
            "top1": round(100 * float((ref.argmax(-1) == got.argmax(-1)).mean()), 1),
            "max_rel": float(f"{np.abs(ref - got).max() / np.abs(ref).max():.3g}")}


def run(original: int, python: str, seed: int, work: Path) -> list[dict]:
    import mlx.core as mx

    from engine.loader import load_model
    from engine.model_runner import ModelRunner
    from tests.gguf_converter import save_hf
    from tests.gguf_models import CASES, build_model, gguf_tensors, write_gguf

    base = CASES["phi3-longrope"]
    case = dataclasses.replace(base, config=dict(
        base.config, original_max_position_embeddings=original))
    model = build_model(case, seed=seed)
    save_hf(case, model, work / "hf", work)
    loaded = load_model(str(write_gguf(work / "phi.gguf", case, gguf_tensors(case, model))))
    rng = np.random.default_rng(seed)
    # within the original and past it (the tiny model's 512 positions at most)
    lengths = {"within": min(original, 24), "past": original + 8}
    prompts = {k: [int(t) for t in rng.integers(3, 260, n)] for k, n in lengths.items()
               if n <= 512}
    done = subprocess.run([python, "-c", RUN, str(work / "hf"), json.dumps(prompts),
                           str(work / "hf.npz")], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"transformers failed:\n{done.stderr[-3000:]}")
    theirs = np.load(work / "hf.npz")
    runners = {"engine short (context within)": ModelRunner(loaded.model,
                                                            context_length=original),
               "engine long (context past)": ModelRunner(loaded.model,
                                                         context_length=2 * original)}
    rows = []
    for prompt, ids in prompts.items():
        x = mx.array([ids])
        sides = {}
        for name, runner in runners.items():
            with runner._kernels():
                sides[name] = np.array(runner.model(x)[0])
        sides["mlx-lm stock (long always)"] = np.array(loaded.model(x)[0])
        for name, got in sides.items():
            rows.append({"original": original, "prompt": f"{prompt} ({len(ids)} tokens)",
                         "side": name, **compare(theirs[prompt], got)})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--converter-python", required=True,
                   help="a Python with torch and transformers")
    p.add_argument("--original", default="4096,16",
                   help="original contexts to try (comma-separated)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    ensure_preloads()
    for original in (int(v) for v in args.original.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            for row in run(original, args.converter_python, args.seed, Path(tmp)):
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
