"""Why 4-bit KV costs what it costs (issue #54): KL and top-1 of KV forms emulated in float.

    python -m bench.kv_bits_causes [--tokens 4096] [--ctx 2048] [--forms engine4,q4_0,...]

Each form rounds a pass's new keys and/or values (after RoPE, as they go into the cache,
where the engine's PackedLayer packs them) and writes the rounded floats into a float
cache, so attention is the float path's: only the stored values differ. Scored as
bench.kv_bits scores (the same text, windows and halves): KL(float || form) and top-1.

Forms (K+V unless the name ends in _k or _v, which round only the keys or only the values):
  engine8, engine4      mx.quantize / mx.dequantize, the engine's kv_bits 8 / 4 (groups of
                        64 / 32, float32 scale and bias): what the packed rows hold
  engine4_g64           4 bits in groups of 64
  engine4_f16           the engine's 4 bits with scale and bias rounded to float16
  minmax4               plain affine: scale (max - min) / 15, bias min (mx.quantize instead
                        moves the range so that 0 is a level)
  q4_0, q8_0            llama.cpp's (ggml's quantize_row_q4_0_ref / q8_0_ref): blocks of
                        32, symmetric, one float16 scale
  q4_0_f32              q4_0 with its scale kept in float32
  f16                   float16 KV (llama.cpp's base)
A form name ending in "h" (engine4h, q4_0h, ...) rounds each row turned by the orthonormal
Walsh-Hadamard matrix of the head's size and turns it back, as llama.cpp does to Q, K and V
whenever its cache is quantized (llama-graph.cpp build_attn: attn_rot_k / attn_rot_v,
LLAMA_ATTN_ROT_DISABLE=1 turns it off): the scores and the output are the same as with the
turned rows stored (H is symmetric and H @ H = I), only the rounding differs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from engine.preload import ensure_preloads

Round = Callable[[Any], Any]


def _affine(bits: int, group: int, half: bool = False) -> Round:
    import mlx.core as mx

    def form(x):
        w, s, b = mx.quantize(x.astype(mx.float32), group_size=group, bits=bits)
        if half:
            s, b = s.astype(mx.float16).astype(mx.float32), b.astype(mx.float16).astype(mx.float32)
        return mx.dequantize(w, s, b, group_size=group, bits=bits)
    return form


def _minmax(bits: int, group: int) -> Round:
    import mlx.core as mx

    levels = (1 << bits) - 1

    def form(x):
        g = x.astype(mx.float32).reshape(*x.shape[:-1], -1, group)
        lo, hi = g.min(-1, keepdims=True), g.max(-1, keepdims=True)
        scale = mx.maximum((hi - lo) / levels, 1e-7)
        q = mx.clip(mx.round((g - lo) / scale), 0, levels)
        return (q * scale + lo).reshape(x.shape)
    return form


def _ggml(bits: int, half: bool = True) -> Round:
    """ggml's q4_0 / q8_0 reference rounding, blocks of 32 along the head."""
    import mlx.core as mx

    def form(x):
        g = x.astype(mx.float32).reshape(*x.shape[:-1], -1, 32)
        if bits == 4:  # d = the largest-magnitude value / -8; q = min(15, trunc(x/d + 8.5))
            at = mx.argmax(mx.abs(g), axis=-1, keepdims=True)
            d = mx.take_along_axis(g, at, axis=-1) / -8
            inv = mx.where(d != 0, 1 / mx.where(d != 0, d, 1), 0)
            q = mx.minimum(15, mx.floor(g * inv + 8.5)) - 8
        else:  # d = max |x| / 127; q = round(x / d)
            d = mx.abs(g).max(-1, keepdims=True) / 127
            inv = mx.where(d != 0, 1 / mx.where(d != 0, d, 1), 0)
            q = mx.round(g * inv)
        if half:
            d = d.astype(mx.float16).astype(mx.float32)
        return (q * d).reshape(x.shape)
    return form


def hadamard(n: int) -> Any:
    """The orthonormal n x n Walsh-Hadamard matrix (Sylvester's order, as ggml_gen_hadamard)."""
    import numpy as np

    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def _turned(form: Round) -> Round:
    import mlx.core as mx

    def turned(x):
        h = mx.array(hadamard(x.shape[-1]).astype("float32"))
        return form(x.astype(mx.float32) @ h) @ h
    return turned


def _f16(x):
    import mlx.core as mx
    return x.astype(mx.float16).astype(mx.float32)


def forms() -> dict[str, Round]:
    return {"engine8": _affine(8, 64), "engine4": _affine(4, 32),
            "engine4_g64": _affine(4, 64), "engine4_f16": _affine(4, 32, half=True),
            "minmax4": _minmax(4, 32), "q4_0": _ggml(4), "q4_0_f32": _ggml(4, half=False),
            "q8_0": _ggml(8), "f16": _f16}


def _split(name: str) -> tuple[str, bool, bool]:
    """A form's rounding and whether it rounds keys, values."""
    for tail, k, v in (("_k", True, False), ("_v", False, True)):
        if name.endswith(tail):
            return name[:-len(tail)], k, v
    return name, True, True


def _form(base: str) -> Round:
    known = forms()
    if base not in known and base.endswith("h") and base[:-1] in known:
        return _turned(known[base[:-1]])
    return known[base]


class _Rounded:
    """A layer cache whose new keys / values are rounded before they go in."""

    __slots__ = ("inner", "keys_form", "values_form")

    def __init__(self, inner: Any, keys_form: Round | None, values_form: Round | None) -> None:
        self.inner, self.keys_form, self.values_form = inner, keys_form, values_form

    def update_and_fetch(self, keys, values):
        k = self.keys_form(keys).astype(keys.dtype) if self.keys_form else keys
        v = self.values_form(values).astype(values.dtype) if self.values_form else values
        return self.inner.update_and_fetch(k, v)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def runner_for(model: Any, name: str | None) -> Any:
    """A float ModelRunner whose passes round the new KV as the form `name` does."""
    from engine.model_runner import ModelRunner

    runner = ModelRunner(model)
    if name is None:
        return runner
    base, on_k, on_v = _split(name)
    form = _form(base)
    runner.view = lambda cache: [  # type: ignore[method-assign]
        _Rounded(c, form if on_k else None, form if on_v else None) for c in cache]
    return runner


def score(loaded: Any, tokens: list[int], ctx: int, chunk: int,
          names: list[str]) -> list[dict]:
    """bench.kv_bits' scoring (windows of ctx, second halves) for each form against float."""
    import mlx.core as mx
    import numpy as np

    from engine import cache as kv

    from .kv_bits import _log_softmax

    runners = {n: runner_for(loaded.model, n) for n in [None, *names]}
    kls: dict = {n: [] for n in names}
    same: dict = {n: [] for n in names}
    for start in range(0, len(tokens) - ctx + 1, ctx):
        window = tokens[start:start + ctx]
        caches = {n: kv.new_cache(r.model) for n, r in runners.items()}
        for at in range(0, ctx - 1, chunk):
            piece = window[at:min(at + chunk, ctx - 1)]
            logp = {}
            for n, r in runners.items():
                out = r.verify(caches[n], piece)
                mx.eval(out)
                logp[n] = _log_softmax(np.array(out.astype(mx.float32)))
            scored = slice(max(0, ctx // 2 - at), None)
            base = logp[None][scored]
            p = np.exp(base)
            for n in names:
                kls[n] += list((p * (base - logp[n][scored])).sum(-1))
                same[n] += list(base.argmax(-1) == logp[n][scored].argmax(-1))
    return [{"form": n, "positions": len(kls[n]), "mean_kl": round(float(np.mean(kls[n])), 5),
             "max_kl": round(float(np.max(kls[n])), 3),
             "top1": round(100 * float(np.mean(same[n])), 2)} for n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kv_bits_causes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--forms", default="engine4,engine4_k,engine4_v,q4_0,q4_0_k,q4_0_v,"
                        "q4_0_f32,engine4_f16,minmax4,engine8,q8_0,f16")
    args = parser.parse_args(argv)
    ensure_preloads()
    from engine.loader import load_model

    from .gguf_parity import default_text

    loaded = load_model("bundled")
    tokens = loaded.tokenizer.encode(default_text())[:args.tokens]
    names = [n for n in args.forms.split(",") if n]
    unknown = [n for n in names if _split(n)[0] not in forms()
               and _split(n)[0][:-1] not in forms()]
    if unknown:
        parser.error(f"unknown forms: {', '.join(unknown)}")
    for row in score(loaded, tokens, args.ctx, args.chunk, names):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
