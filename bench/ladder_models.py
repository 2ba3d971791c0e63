"""`python -m bench.ladder_models`: the random-weight GGUFs of issue #48's model ladder.

    python -m bench.ladder_models --out /work/ladder --llama-cpp BIN_DIR \\
        --converter LLAMA_CPP_TREE/convert_hf_to_gguf.py --converter-python PYTHON \\
        --tokenizer TOKENIZER_DIR [--cells llama-135m,qwen3-1.5b] [--types Q4_0,Q4_K_M,Q8_0]

For each architecture (llama, qwen3, gemma3) and size (135m, 0.5b, 1.5b, 3b): mlx-lm's own
module tree for that architecture gives the tensors' names and shapes; each is filled with
random values as transformers initialises a checkpoint (normal, std 0.02; norms at their
identity), saved as a Hugging Face checkpoint (safetensors + config.json + the tokenizer),
converted to an f16 GGUF by llama.cpp's converter (`--converter`, run by
`--converter-python`, which has its needs: torch, transformers, gguf) and quantized with
`llama-quantize` to each type. Writes ARCH-SIZE-TYPE.gguf under --out; the checkpoint and
the f16 file are deleted unless --keep-f16.

The tokenizer is any Hugging Face tokenizer directory that llama.cpp's converter knows
(e.g. one made from its qwen2 test vocabulary); all architectures share it, so every cell
has the same vocabulary (151,936 rows of embedding, tied to the head but in gemma3) and
the same prompts.
Random weights give random text: the benches check that generations run to max_tokens.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

TYPES = ("Q4_K_M", "Q4_0", "Q8_0")  # the ladder runs Q4_K_M first
VOCAB = 151936  # the qwen2 vocabulary's padded size
# (HF architecture, mlx-lm model module, config fields of that architecture)
ARCHS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "llama": ("LlamaForCausalLM", "llama", {"model_type": "llama", "rope_theta": 500000.0,
                                            "hidden_act": "silu"}),
    "qwen3": ("Qwen3ForCausalLM", "qwen3", {"model_type": "qwen3", "rope_theta": 1000000.0,
                                            "hidden_act": "silu"}),
    "gemma3": ("Gemma3ForCausalLM", "gemma3_text", {
        "model_type": "gemma3_text", "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
        "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 512,
        "sliding_window_pattern": 6, "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
        # untied: the engine's loader refuses a tied Gemma 3 GGUF (mlx-lm's gemma3_text
        # has an lm_head until its sanitize sees none; the loader checks before that)
        "tie_word_embeddings": False}),
    # Qwen3-30B-A3B's block (128 experts, 8 a token, normalised top-k, every layer sparse)
    "qwen3moe": ("Qwen3MoeForCausalLM", "qwen3_moe", {
        "model_type": "qwen3_moe", "rope_theta": 1000000.0, "hidden_act": "silu",
        "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
        "mlp_only_layers": [], "norm_topk_prob": True}),
}
# Sizes by shape (SmolLM2-135M's and Qwen2.5's bodies); the shared 152k vocabulary adds
# 151,936 x hidden embedding parameters, so the 135m cell has ~180M in all
SIZES: dict[str, dict[str, int]] = {
    "135m": {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
             "num_attention_heads": 9, "num_key_value_heads": 3},
    "0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
             "num_attention_heads": 14, "num_key_value_heads": 2},
    "1.5b": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
             "num_attention_heads": 12, "num_key_value_heads": 2},
    "3b": {"hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
           "num_attention_heads": 16, "num_key_value_heads": 2},
}


# A MoE's size is its total parameters: Qwen3-30B-A3B's block scaled down (head 128, 4 KV
# heads, experts 1/4 of hidden wide so Q4_K's 256-blocks fit the down projection), 1.43B in
# all with the shared vocabulary, ~0.3B read a token (8 experts of 128, attention, head)
ARCH_SIZES: dict[str, dict[str, dict[str, int]]] = {
    "qwen3moe": {
        "1.5b": {"hidden_size": 1024, "intermediate_size": 3072, "moe_intermediate_size": 256,
                 "num_hidden_layers": 12, "num_attention_heads": 16,
                 "num_key_value_heads": 4, "head_dim": 128},
    },
}


def sizes_of(arch: str) -> dict[str, dict[str, int]]:
    """The sizes an architecture comes in (the dense shapes unless it has its own)."""
    return ARCH_SIZES.get(arch, SIZES)


def hf_config(arch: str, size: str) -> dict[str, Any]:
    """config.json of the cell, read alike by mlx-lm and by llama.cpp's converter."""
    hf_arch, _, fields = ARCHS[arch]
    shape = sizes_of(arch)[size]
    head_dim = shape.get("head_dim", shape["hidden_size"] // shape["num_attention_heads"])
    cfg: dict[str, Any] = {
        "architectures": [hf_arch], **shape, "head_dim": head_dim,
        "vocab_size": VOCAB, "rms_norm_eps": 1e-6, "max_position_embeddings": 32768,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "bos_token_id": 151643, "eos_token_id": 151645, **fields}
    if arch == "gemma3":
        cfg["query_pre_attn_scalar"] = head_dim
        layers = shape["num_hidden_layers"]
        cfg["layer_types"] = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                              for i in range(layers)]
    return cfg


def random_checkpoint(arch: str, size: str, out: Path, tokenizer: Path, seed: int = 0) -> int:
    """Write the cell's random checkpoint into `out`; returns its parameter count."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    cfg = hf_config(arch, size)
    module = importlib.import_module(f"mlx_lm.models.{ARCHS[arch][1]}")
    model = module.Model(module.ModelArgs.from_dict(cfg))  # lazy: its own init never runs
    mx.random.seed(seed)
    norm_value = 0.0 if arch == "gemma3" else 1.0  # Gemma's norms scale by 1 + weight
    weights = {}
    for name, p in tree_flatten(model.parameters()):
        if name == "lm_head.weight" and cfg["tie_word_embeddings"]:
            continue  # mlx-lm's Gemma 3 has one until its weights say tied
        if name.endswith("norm.weight"):
            weights[name] = mx.full(p.shape, norm_value, dtype=mx.bfloat16)
        else:
            weights[name] = (0.02 * mx.random.normal(p.shape)).astype(mx.bfloat16)
    if "num_experts" in cfg:
        weights = unstacked_experts(weights, cfg["num_experts"])
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "pt"})
    count = sum(w.size for w in weights.values())
    del weights
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    for f in tokenizer.iterdir():
        if f.is_file():
            shutil.copy(f, out / f.name)
    return count


def unstacked_experts(weights: dict[str, Any], experts: int) -> dict[str, Any]:
    """mlx-lm's stacked `switch_mlp` (E, out, in) as a HF checkpoint's one tensor an expert
    (`mlp.experts.E.gate_proj.weight`), the names llama.cpp's converter merges."""
    out = {}
    for name, w in weights.items():
        if ".mlp.switch_mlp." not in name:
            out[name] = w
            continue
        prefix, proj = name.split(".mlp.switch_mlp.")
        for e in range(experts):
            out[f"{prefix}.mlp.experts.{e}.{proj}"] = w[e]
    return out


def make_cell(arch: str, size: str, args: argparse.Namespace) -> list[Path]:
    out: Path = args.out
    types = args.types.split(",")
    targets = [out / f"{arch}-{size}-{t}.gguf" for t in types]
    if all(t.is_file() for t in targets):
        return targets
    hf = out / f"{arch}-{size}-hf"
    f16 = out / f"{arch}-{size}-f16.gguf"
    t = time.perf_counter()
    if not f16.is_file():
        params = random_checkpoint(arch, size, hf, args.tokenizer)
        print(f"{arch}-{size}: {params / 1e6:.0f}M parameters ({time.perf_counter() - t:.0f} s)",
              flush=True)
        subprocess.run([args.converter_python, str(args.converter), str(hf), "--outtype", "f16",
                        "--outfile", str(f16)], check=True, capture_output=True)
        shutil.rmtree(hf)
    for kind, target in zip(types, targets, strict=True):
        if not target.is_file():
            subprocess.run([str(args.llama_cpp / "llama-quantize"), str(f16), str(target), kind],
                           check=True, capture_output=True)
        print(f"  {target.name}: {target.stat().st_size / 2**20:.0f} MiB", flush=True)
    if not args.keep_f16:
        f16.unlink()
    print(f"{arch}-{size}: done in {time.perf_counter() - t:.0f} s", flush=True)
    return targets


def cell_names(spec: str | None) -> list[tuple[str, str]]:
    """ARCH-SIZE names, smallest first (all of them when `spec` is None)."""
    every = [(a, s) for s in SIZES for a in ARCHS if s in sizes_of(a)]
    if not spec:
        return every
    wanted = spec.split(",")
    unknown = set(wanted) - {f"{a}-{s}" for a, s in every}
    if unknown:
        raise SystemExit(f"unknown cells {sorted(unknown)}; known: ARCH-SIZE with ARCH in "
                         f"{list(ARCHS)}, SIZE in {list(SIZES)}")
    return [(a, s) for a, s in every if f"{a}-{s}" in wanted]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ladder_models", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--llama-cpp", type=Path, required=True, help="directory of llama-quantize")
    p.add_argument("--converter", type=Path, required=True, help="convert_hf_to_gguf.py")
    p.add_argument("--converter-python", required=True, help="a Python with its needs")
    p.add_argument("--tokenizer", type=Path, required=True, help="a HF tokenizer directory")
    p.add_argument("--cells", default="llama-135m,qwen3-135m,gemma3-135m",
                   help="ARCH-SIZE,... (default: the 135m row)")
    p.add_argument("--types", default=",".join(TYPES))
    p.add_argument("--keep-f16", action="store_true")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for arch, size in cell_names(args.cells):
        make_cell(arch, size, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
