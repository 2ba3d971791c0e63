"""Every GGUF architecture the loader takes, against llama.cpp's own inference on the same
file: tokens, logits, KL, greedy tokens.

    python -m bench.arch_parity --bin DIR --tree TREE --converter-python PY
        [--cases llama,qwen3,...] [--types F32,Q8_0,Q4_K_M] [--ctx 128] [--chunks 4]
        [--steps 32] [--tiny] [--engine-context N] [--json OUT]

DIR holds llama.cpp's binaries (llama-quantize, llama-perplexity, llama-server,
llama-tokenize); TREE is its source tree (convert_hf_to_gguf.py), PY a Python with torch
and transformers for the converter. Never in CI (tests/engine/test_arch_parity.py runs it
where those are set).

For each case of tests/gguf_models.py (a tiny random-weight config per architecture;
`phi3-longrope-past` is the bench's own: Phi-3.5's LongRoPE with an original context of 64,
so llama.cpp's contexts here are past it and take the long factors, and the text's
positions run past it),
widened so every linear's input is 256 wide where the architecture lets it (llama.cpp's
K-quants need rows of 256; `--tiny` keeps the CI sizes), random weights are saved as the
Hugging Face checkpoint of its class and converted by llama.cpp's converter (F32); a case
the converter is not run on here (gpt-oss) is written by the tiny writer instead, as the
converter writes it. Each other type is made from the F32 file by llama-quantize. Then, per file:

- tokens: llama-tokenize's ids against the engine's tokenizer on a few texts;
- logits over a text (llama-perplexity --save-all-logits: log-probabilities of each
  chunk's second half, kept as uint16 with a scale, ~2e-4 nats a step) against the
  engine's (its module copy with the native kernels, what a chat runs) and mlx-lm's
  model as the loader builds it in float32 (no int8 activations; a LongRoPE model's
  factors those the engine chooses for llama.cpp's context, engine/longrope.py): mean
  and max KL,
  top-1 agreement; for scale, llama.cpp's defaults (float16 KV, flash attention) in
  micro-batches of 32 against its float32 run, and a quantized file against the F32 one
  (both llama.cpp: the quantization's own effect). llama.cpp runs with float32 KV and no
  flash attention here (KV_F32), so an F32 file is compared at float noise;
- greedy: llama-server's /completion (temperature 0, 32 tokens, every token's
  log-probability: float32, exact) against the engine's greedy tokens from the same
  prompt (where they first differ), and the engine's log-probabilities on llama.cpp's
  own tokens (max |difference|: the logits' difference less their common shift).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from bench.gguf_parity import SELF_UBATCH, default_text, kl_against, read_llama_logprobs
from engine.preload import ensure_preloads

TYPES = ("F32", "Q8_0", "Q4_K_M")
WIDE = 256  # llama.cpp's K-quant super-block: a row narrower falls back to Q5_0 / Q8_0
# Texts whose ids llama-tokenize and the engine must agree on (specials, digits, bytes)
TOKEN_TEXTS = ("<|im_start|>user\nWhat is 1234 + 56?<|im_end|>\n<|im_start|>assistant\n",
               "The theory of everything, héllo wörld 👋🏽 — \"quoted\"\n\n  indented\tTab",
               "def f(x):\n    return x ** 2  # 12 apples, 3.14159")
# llama.cpp keeps K and V in float16 by default and its CPU flash attention rounds through
# float16 (an F32 file's log-probabilities then differ from float32 arithmetic by ~1e-2):
# float32 KV and no flash attention here, so they differ by float noise (~2e-5)
KV_F32 = ("-ctk", "f32", "-ctv", "f32", "-fa", "off")
# llama-server's context (one sequence); llama-perplexity's per sequence is within it too at
# the default --ctx, so a LongRoPE model's factor set is the same in both (the short one
# for Phi-3.5, whose original context is 4096), and the engine side is made for it
SERVER_CTX = 512
PROMPT = [1, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 3, 5, 7, 9, 11, 13, 200]


# LongRoPE's original context in the bench's past case: below llama-perplexity's context
# per sequence (--ctx 128, which llama.cpp pads to 256) and llama-server's (512), so both
# take the long factors (get_rope_factors: n_ctx_seq > n_ctx_orig_yarn), as the engine
# does for its 512, and the text's positions 64-127 are past the original
PAST_ORIGINAL = 64


def cases() -> dict[str, Any]:
    """tests/gguf_models.py's cases and the bench's own."""
    from tests.gguf_models import CASES

    within = CASES["phi3-longrope"]
    past = dataclasses.replace(within, config=dict(
        within.config, original_max_position_embeddings=PAST_ORIGINAL))
    return {**CASES, "phi3-longrope-past": past}


def longrope_factors(case: Any) -> Any:
    """A LongRoPE case with a short and a long factor set for its head (a widened head has
    more frequencies: each set keeps its range, 1 to 1.4 short and 1 to 2.8 long, apart
    enough that the wrong set's logits are far), in its config and as the converter's
    tensors."""
    c = case.config
    half = (c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]) // 2
    short = [1.0 + 0.4375 * i / (half - 1) for i in range(half)]
    long = [1.0 + 1.75 * i / (half - 1) for i in range(half)]
    return dataclasses.replace(
        case, config=dict(c, rope_scaling=dict(c["rope_scaling"], short_factor=short,
                                                long_factor=long)),
        extra=dict(case.extra, **{"rope_factors_long.weight": np.array(long, np.float32),
                                  "rope_factors_short.weight": np.array(short, np.float32)}))


def widen(case: Any) -> Any:
    """The case with hidden and MLP widths multiples of 256 (heads keep their size: a config
    without head_dim gets its old one, or its M-RoPE sections scaled with it)."""
    c = dict(case.config)
    ratio = WIDE // c["hidden_size"]
    c["hidden_size"] = WIDE
    for key in ("intermediate_size", "block_ff_dim"):
        if key in c:
            c[key] = 2 * WIDE
    for key in ("moe_intermediate_size", "shared_expert_intermediate_size", "block_dim"):
        if key in c:
            c[key] = WIDE
    if c.get("model_type") == "gpt_oss":
        c["intermediate_size"] = WIDE
    # llama.cpp's qwen3vl adds a DeepStack level after its layer to every token's row, the
    # last layer's rows already cut to the outputs asked for: a level on the last layer
    # fails its shape assertion (ggml_can_repeat) unless every output is asked (a real
    # Qwen3-VL's 3 levels sit on its first of 28+ layers)
    if c.get("num_deepstack_layers", 0) >= c["num_hidden_layers"]:
        c["num_hidden_layers"] = c["num_deepstack_layers"] + 1
    scaling = c.get("rope_scaling") or {}
    if case.gguf_arch == "qwen3vl":
        # llama.cpp's interleaved M-RoPE (ggml-cpu ops.cpp rope_yarn_mrope) gives a pair past
        # 3 x its section the 4th position, 0 for text: unrotated, where transformers keeps
        # the time position. The tiny [2, 3, 3] leaves pair 6 of 8 so (F32 KL 2e-3, a greedy
        # token apart at 15); [3, 3, 2] covers every pair (a real Qwen3-VL's [24, 20, 20]
        # leaves its pairs 61 and 62 of 64, the slowest, so)
        c["rope_scaling"] = dict(scaling, mrope_section=[3, 3, 2])
        scaling = c["rope_scaling"]
    if "head_dim" not in c and "mrope_section" in scaling:
        c["rope_scaling"] = dict(scaling, mrope_section=[s * ratio for s in
                                                         scaling["mrope_section"]])
    wide = dataclasses.replace(case, config=c)
    # LongRoPE's factors are a head's frequencies: the widened head (64) has 32
    return longrope_factors(wide) if "short_factor" in scaling else wide


def build(name: str, tiny: bool, seed: int):
    """The case (widened unless `tiny`) and its random mlx-lm model, its final norm scaled
    so its next-token distributions are peaked but not one token at probability 1 (a
    widened Gemma 2 otherwise gives its input token at 1.0), nor near-uniform. A widened
    model's matrices are scaled by sqrt(64 / 256): at the tiny ones' 0.3 a 256-wide model
    amplifies a small perturbation (llama.cpp's 8-bit activations: KL 0.025 against float
    ones on llama Q8_0, 0.006 scaled)."""
    from mlx.utils import tree_flatten, tree_unflatten

    from tests.gguf_models import build_model

    case, scale = cases()[name], 1.0
    if not tiny and case.config["model_type"] != "gpt_oss":
        case = widen(case)  # gpt-oss's extra tensors fit the tiny heads
        scale = (64 / WIDE) ** 0.5
    model = build_model(case, seed=seed)
    if scale != 1.0:  # the tiny models' weight sizes for their fan-in: 4 times wider, half
        model.update(tree_unflatten([(n, v * scale if v.ndim >= 2 else v)
                                     for n, v in tree_flatten(model.parameters())]))
    calibrate(model, case.norm_shift)
    return case, model


def calibrate(model: Any, norm_shift: float, target: float = 2.5) -> None:
    """Scale the final norm's gain (weight + norm_shift: Gemma's are stored less one) so
    the next-token distributions on PROMPT have a mean entropy of about `target` nats
    (bisection on the scale; a soft-cap and a tied head's own token make it nonlinear)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    params = dict(tree_flatten(model.parameters()))
    name = next(n for n in params if n.endswith(("model.norm.weight",
                                                 "model.embedding_norm.weight")))
    gain0 = params[name] + norm_shift

    def entropy(k: float) -> float:
        model.load_weights([(name, gain0 * k - norm_shift)], strict=False)
        logp = _log_softmax(np.array(model(mx.array([PROMPT]))[0], dtype=np.float64))
        return float(-(np.exp(logp) * logp).sum(-1).mean())

    lo, hi = -8.0, 8.0  # log2 of the scale; entropy falls as the scale grows
    for _ in range(16):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if entropy(2 ** mid) > target else (lo, mid)
    entropy(2 ** ((lo + hi) / 2))
    mx.eval(model.parameters())


def f32_file(name: str, case: Any, model: Any, work: Path, args: argparse.Namespace
             ) -> tuple[Path, str]:
    """The converter's F32 file of the model, or the tiny writer's where it is not run."""
    from tests.gguf_converter import convert, converts
    from tests.gguf_models import gguf_tensors, write_gguf

    if converts(case):
        return convert(case, model, work, tree=args.tree, python=args.converter_python), \
            "convert_hf_to_gguf.py"
    # a general.name without "phi3": llama.cpp then wants a Phi-3 vocabulary ("</s>")
    return write_gguf(work / f"{name}.gguf", case, gguf_tensors(case, model),
                      name="tiny random model"), "tiny writer"


def quantized_file(bin_dir: Path, f32: Path, kind: str) -> Path:
    if kind == "F32":
        return f32
    out = f32.with_name(f"{f32.stem}-{kind}.gguf")
    subprocess.run([str(bin_dir / "llama-quantize"), str(f32), str(out), kind], check=True,
                   capture_output=True)
    return out


def llama_tokens(bin_dir: Path, gguf: Path, text: str) -> list[int]:
    run = subprocess.run([str(bin_dir / "llama-tokenize"), "-m", str(gguf), "-p", text,
                          "--ids", "--log-disable"], check=True, capture_output=True,
                         text=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def token_mismatches(bin_dir: Path, gguf: Path, tokenizer: Any) -> list[dict]:
    out = []
    for text in TOKEN_TEXTS:
        theirs = llama_tokens(bin_dir, gguf, text)
        ours = tokenizer.encode(text)
        if ours != theirs:
            out.append({"text": text, "llama": theirs, "engine": ours})
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def token_bytes(tokenizer: Any, ids: list[int]) -> list[bytes]:
    """Each token's bytes as llama-server's pieces are (a control token: none)."""
    from mlx_lm.tokenizer_utils import _byte_decoder

    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    special = set(hf.all_special_ids) | {t.content and hf.convert_tokens_to_ids(t.content)
                                         for t in hf.added_tokens_decoder.values()}
    dec = _byte_decoder()
    return [b"" if i in special else bytes(dec[ch] for ch in hf.convert_ids_to_tokens(i))
            for i in ids]


def not_whole_text(tokenizer: Any, n_vocab: int) -> list[int]:
    """The tokens whose bytes are not whole UTF-8 text (the tiny vocabulary's single bytes
    0x80-0xff). llama-server hands a step's probabilities only where the text so far ends
    on a whole character (server-context.cpp), and a random model repeats such a byte for
    ever, so both sides' greedy leave these out (their probabilities are still compared)."""
    pieces = token_bytes(tokenizer, list(range(n_vocab)))
    return [i for i, b in enumerate(pieces) if any(c >= 0x80 for c in b)]


def llama_greedy(bin_dir: Path, gguf: Path, prompt: list[int], steps: int, n_vocab: int,
                 banned: list[int], ctx: int = SERVER_CTX) -> tuple[list[int], np.ndarray]:
    """llama-server's greedy tokens after `prompt`, `banned` and its end tokens never
    chosen, and each step's log-probabilities over the whole vocabulary (before sampling:
    the model's softmax)."""
    port = _free_port()
    proc = subprocess.Popen([str(bin_dir / "llama-server"), "-m", str(gguf), "-t", "2",
                             "-c", str(ctx), "-np", "1", *KV_F32, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama-server did not start on {gguf.name}")
            time.sleep(0.05)
        body = {"prompt": prompt, "n_predict": steps, "temperature": 0, "ignore_eos": True,
                "n_probs": n_vocab, "cache_prompt": False, "return_tokens": True,
                "logit_bias": [[i, False] for i in banned]}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            reply = json.loads(r.read())
    finally:
        proc.terminate()
        proc.wait(10)
    tokens, entries = reply["tokens"], reply.get("completion_probabilities", [])
    if [e["id"] for e in entries] != tokens:
        raise RuntimeError("llama-server's probabilities do not line up with its tokens")
    rows = np.full((len(tokens), n_vocab), -np.inf)
    for row, step in zip(rows, entries, strict=True):
        for p in step["top_logprobs"]:
            row[p["id"]] = p["logprob"]
    return tokens, rows


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


class EngineSide:
    """A file loaded as the engine runs it (native kernels) or as mlx-lm's float32 model,
    both for `context` tokens per sequence (a LongRoPE model's factor set)."""

    def __init__(self, gguf: Path, exact: bool, context: int = SERVER_CTX) -> None:
        from engine import module_tree
        from engine.loader import load_model
        from engine.longrope import choose_longrope
        from engine.model_runner import ModelRunner

        self.lm = load_model(str(gguf), quantized=False if exact else None)
        self.runner = None if exact else ModelRunner(self.lm.model, context_length=context)
        # mlx-lm's own modules; a LongRoPE's in a copy, with the engine's choice
        self.model = module_tree.clone(self.lm.model) if exact else None
        if self.model is not None and choose_longrope(self.model, context) is None:
            self.model = self.lm.model

    def logits(self, ids: list[int]) -> np.ndarray:
        import mlx.core as mx

        x = mx.array([ids])
        if self.runner is None:
            out = self.model(x)
        else:
            with self.runner._kernels():
                out = self.runner.model(x)
        return np.array(out[0].astype(mx.float32))

    def greedy(self, prompt: list[int], steps: int, banned: list[int]) -> list[int]:
        ids = list(prompt)
        for _ in range(steps):  # the whole sequence a step: no cache in the comparison
            ids.append(int(self.masked(self.logits(ids)[-1], banned).argmax()))
        return ids[len(prompt):]

    def masked(self, logits: np.ndarray, banned: list[int]) -> np.ndarray:
        """`banned` and the end tokens masked, as llama-server's logit_bias and ignore_eos
        mask them."""
        out = logits.copy()
        out[..., sorted(set(banned) | self.lm.eos_token_ids)] = -np.inf
        return out


def _first_diff(a: list[int], b: list[int]) -> int | None:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), None)


def compare_file(bin_dir: Path, gguf: Path, kind: str, text: Path,
                 args: argparse.Namespace, f32_logp: np.ndarray | None) -> dict:
    """One file's row; `f32_logp`: llama.cpp's log-probabilities on the F32 file of the
    same weights (the quantization's own effect, for scale)."""
    ctx = ["-c", str(args.ctx), "--chunks", str(args.chunks), "-t", "2"]
    base = gguf.with_suffix(".kld")
    subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(gguf), "-f", str(text), *ctx,
                    *KV_F32, "--save-all-logits", str(base)], check=True, capture_output=True)
    _, chunks, base_logp = read_llama_logprobs(base)
    # llama.cpp's own spread: its defaults (float16 KV, flash attention) in micro-batches
    # of 32 positions (a server's path) against the float32 run above
    selfp = gguf.with_suffix(".ub.kld")
    subprocess.run([str(bin_dir / "llama-perplexity"), "-m", str(gguf), "-f", str(text), *ctx,
                    "-ub", str(SELF_UBATCH), "--save-all-logits", str(selfp)], check=True,
                   capture_output=True)
    self_logp = read_llama_logprobs(selfp)[2]
    n_vocab = base_logp.shape[-1]
    flat = base_logp.reshape(-1, n_vocab)
    first = chunks.shape[1] // 2
    row: dict[str, Any] = {"type": kind, "positions": int(flat.shape[0])}
    p = np.exp(flat.astype(np.float64))
    row["llama_entropy"] = round(float(-(p * np.where(p > 0, flat, 0)).sum(-1).mean()), 3)
    row["llama_top_p"] = round(float(p.max(-1).mean()), 3)
    kl_s, top1_s, _ = kl_against(flat, self_logp.reshape(-1, n_vocab))
    row["llama_default_ub32_kl"] = round(kl_s, 6)
    row["llama_default_ub32_top1"] = round(100 * top1_s, 2)
    if f32_logp is not None:  # llama.cpp on this type against llama.cpp on F32
        kl_q, top1_q, _ = kl_against(f32_logp.reshape(-1, n_vocab), flat)
        row["llama_vs_f32_kl"] = round(kl_q, 6)
        row["llama_vs_f32_top1"] = round(100 * top1_q, 2)
    llama_tok: list[int] = []
    # the engine's context per sequence: llama-server's unless a control asks another (a
    # LongRoPE model's other factor set)
    context = getattr(args, "engine_context", None) or SERVER_CTX
    row["engine_context"] = context
    for side, exact in (("engine", False), ("mlx_lm", True)):
        eng = EngineSide(gguf, exact, context)
        if side == "engine":
            mism = token_mismatches(bin_dir, gguf, eng.lm.tokenizer)
            row["tokenizer_same"] = not mism
            if mism:
                row["tokenizer_diffs"] = mism
            banned = not_whole_text(eng.lm.tokenizer, n_vocab)
            llama_tok, llama_lp = llama_greedy(bin_dir, gguf, PROMPT, args.steps, n_vocab,
                                               banned)
        ours = np.stack([eng.logits(c.tolist())[first:-1] for c in chunks])[..., :n_vocab]
        kl, top1, worst = kl_against(flat, ours.reshape(-1, n_vocab))
        row[f"{side}_kl"] = round(kl, 6)
        row[f"{side}_max_kl"] = round(worst, 5)
        row[f"{side}_top1"] = round(100 * top1, 2)
        # the logits on llama.cpp's own greedy path: their log-softmax against llama's
        forced = eng.logits(PROMPT + llama_tok[:-1])[len(PROMPT) - 1:, :n_vocab]
        diff = np.abs(_log_softmax(forced) - llama_lp)
        row[f"{side}_greedy_max_logprob_diff"] = float(f"{diff.max():.3g}")
        row[f"{side}_greedy_path_top1"] = round(100 * float(
            (eng.masked(forced, banned).argmax(-1) == np.asarray(llama_tok)).mean()), 2)
        mine = eng.greedy(PROMPT, args.steps, banned)
        row[f"{side}_greedy_first_diff"] = _first_diff(mine, llama_tok)
        row[f"{side}_description"] = eng.lm.description
    row["_logp"] = base_logp
    return row


def run_case(name: str, bin_dir: Path, work: Path, text: Path,
             args: argparse.Namespace) -> list[dict]:
    case, model = build(name, args.tiny, seed=args.seed)
    out = work / name
    out.mkdir()
    f32, made_by = f32_file(name, case, model, out, args)
    rows, f32_logp = [], None
    for kind in args.types.split(","):
        try:
            gguf = quantized_file(bin_dir, f32, kind)
            row = {"case": name, "arch": case.gguf_arch, "file_by": made_by,
                   "hidden": case.config["hidden_size"]} | compare_file(
                bin_dir, gguf, kind, text, args, f32_logp)
            logp = row.pop("_logp")
            if kind == "F32":
                f32_logp = logp
        except Exception as e:  # a row saying why, and the next case runs
            err = getattr(e, "stderr", None) or str(e)
            err = err.decode(errors="replace") if isinstance(err, bytes) else err
            row = {"case": name, "arch": case.gguf_arch, "type": kind,
                   "error": err.strip().splitlines()[-3:]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True, help="directory of llama.cpp's binaries")
    p.add_argument("--tree", required=True, help="llama.cpp's source tree (the converter)")
    p.add_argument("--converter-python", required=True, help="a Python with torch")
    p.add_argument("--cases", default=",".join(sorted(cases())))
    p.add_argument("--types", default=",".join(TYPES))
    p.add_argument("--ctx", type=int, default=128)
    p.add_argument("--chunks", type=int, default=4)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="the CI sizes, not widened")
    p.add_argument("--engine-context", type=int, default=None,
                   help="the engine's context per sequence (default llama-server's, "
                        f"{SERVER_CTX}); a control: a LongRoPE model's other factor set")
    p.add_argument("--json", default=None, help="write every row here as JSON")
    args = p.parse_args()
    ensure_preloads()
    bin_dir = Path(args.bin)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "text.txt"
        text.write_text(default_text(), encoding="utf-8")
        for name in args.cases.split(","):
            rows += run_case(name, bin_dir, Path(tmp), text, args)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
