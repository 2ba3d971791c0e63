"""`python -m bench.solo_decode_profile FILE.gguf [FILE.gguf ...] [--rounds 20] [--context 64]`:
where one stream's decode step goes on a GGUF (issue #48: one stream at 1.5B behind
llama-server), in the engine's copy of the model with the tabs' sampling.

Per file: the packed bytes a token reads by role (q/k/v, o, gate/up, down, the head) against
the file's own bytes for the same tensors, and RSS; then, timed round-robin (a load burst
hits every piece alike; medians of --rounds), wall and process-CPU ms of:

- each role's linears over all layers, evaluated together (their bytes over that time:
  the GB/s the kernel reaches; CPU / wall: how many cores it kept busy);
- the head alone, and the final norm;
- the tabs' sampling of one row of logits (repetition penalty, then the native sampler);
- the whole compiled decode step (the logits), and the step with the sampling (as the
  engine's lone row runs it); their difference from the sum of the linears is the rest
  (norms, RoPE, attention, residuals, MLX's dispatch).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import mlx.core as mx

from app.process_memory import resident_bytes
from bench.moe_decode_profile import round_robin
from engine.preload import ensure_preloads

ROLES = {"q_proj": "q/k/v", "k_proj": "q/k/v", "v_proj": "q/k/v", "o_proj": "o",
         "gate_proj": "gate/up", "up_proj": "gate/up", "down_proj": "down"}


def _file_bytes(path: str) -> dict[str, int]:
    """The GGUF's bytes per tensor name."""
    from gguf import GGUFReader

    return {t.name: int(t.n_bytes) for t in GGUFReader(path).tensors}


def _module_bytes(m) -> int:
    pk = getattr(m, "_native_packed", None)
    if pk is not None:
        return sum(a.nbytes for a in pk)
    return sum(v.nbytes for v in m.parameters().values() if isinstance(v, mx.array))


def profile(path: str, rounds: int, context: int) -> None:
    from engine.cache import new_cache
    from engine.loader import load_model
    from engine.model_runner import ModelRunner
    from engine.sampling import RowSampler, sample_rows

    from .request_sampling import TABS, RequestSampling

    loaded = load_model(path)
    runner = ModelRunner(loaded.model)
    model = runner.model
    inner = model.model
    rss = (resident_bytes() or 0) / 2**20
    layers = inner.layers
    hidden = layers[0].input_layernorm.weight.shape[0]
    cache = new_cache(model)
    prompt = [(i * 7) % 250 + 3 for i in range(context)]
    runner.prefill(cache, prompt)

    # the linears by role, each role's modules called as the engine calls them
    by_role: dict[str, list[tuple[object, list]]] = {}
    role_bytes: dict[str, int] = {}
    for li, layer in enumerate(layers):
        for parent in (layer.self_attn, layer.mlp):
            for name, role in ROLES.items():
                m = parent.get(name) if hasattr(parent, "get") else None
                if m is None:
                    continue
                role_bytes[role] = role_bytes.get(role, 0) + _module_bytes(m)
                by_role.setdefault(role, []).append((li, parent, name))
    head = model.lm_head if "lm_head" in model else inner.embed_tokens.as_linear
    head_mod = model.lm_head if "lm_head" in model else inner.embed_tokens
    role_bytes["head"] = _module_bytes(head_mod)

    fb = _file_bytes(path)
    file_role: dict[str, int] = {}
    for name, n in fb.items():
        for key, role in (("attn_q.", "q/k/v"), ("attn_k.", "q/k/v"), ("attn_v.", "q/k/v"),
                          ("attn_output.", "o"), ("ffn_gate.", "gate/up"),
                          ("ffn_up.", "gate/up"), ("ffn_down.", "down")):
            if key in name and name.endswith(".weight"):
                file_role[role] = file_role.get(role, 0) + n
    file_role["head"] = fb.get("output.weight", fb.get("token_embd.weight", 0))

    x = mx.random.normal((1, 1, hidden)) * 0.5
    inter = {}
    for role, mods in by_role.items():
        li, parent, name = mods[0]
        inter[role] = parent[name].weight.shape[1] * 32 // parent[name].bits
    xs = {k: mx.random.normal((1, 1, v)) * 0.5 for k, v in inter.items()}
    mx.eval(x, *xs.values())

    def linears(role: str) -> Callable[[], object]:
        def run():
            outs = []
            for _, parent, name in by_role[role]:
                outs.append(parent[name](xs[role]))
            return outs
        return run

    sampler = RowSampler(RequestSampling("tabs", TABS).params(max_tokens=1000, seed=7), 7)
    history = prompt[-64:]
    logits = runner.decode(cache, [5])
    mx.eval(logits)
    _back(cache)

    def step():
        out = runner.decode(cache, [5])
        _back(cache)
        return out

    def step_sampled():
        out = sample_rows([sampler], [history], [3], runner.decode(cache, [5]))
        _back(cache)
        return out

    pieces: dict[str, Callable[[], object]] = {r: linears(r) for r in by_role}
    pieces["head"] = lambda: head(x)
    pieces["final norm"] = lambda: inner.norm(x)
    pieces["sampling (tabs)"] = lambda: sample_rows([sampler], [history], [3], logits)
    pieces["step (logits)"] = step
    pieces["step + sampling"] = step_sampled
    times = round_robin(pieces, rounds)
    name = os.path.basename(path)
    print(f"{name}: {len(layers)} layers, hidden {hidden}, RSS {rss:.0f} MiB after "
          f"install; ms a step, median of {rounds} rounds (wall, CPU, CPU/wall; GB/s of "
          f"the packed bytes)", flush=True)
    total_lin = 0.0
    for role, (wall, cpu) in times.items():
        line = f"  {role:18s} {wall:8.2f} {cpu:8.2f} {cpu / wall if wall else 0:5.2f}"
        if role in role_bytes:
            total_lin += wall
            b, f = role_bytes[role], file_role.get(role, 0)
            line += (f"  packed {b / 2**20:7.1f} MiB, file {f / 2**20:7.1f} MiB "
                     f"({b / f if f else 0:.3f}x), {b / wall / 1e6:5.1f} GB/s")
        print(line, flush=True)
    rest = times["step (logits)"][0] - total_lin - times["final norm"][0]
    print(f"  linears + head {total_lin:.2f} ms; the step's rest (norms, RoPE, attention, "
          f"dispatch) {rest:.2f} ms; packed {sum(role_bytes.values()) / 2**20:.0f} MiB "
          f"a token, file {sum(file_role.values()) / 2**20:.0f} MiB", flush=True)


def _back(cache) -> None:
    for c in cache:  # the context stays at its length
        c.offset -= 1


def main(argv: list[str] | None = None) -> int:
    ensure_preloads()
    p = argparse.ArgumentParser(prog="python -m bench.solo_decode_profile", description=__doc__)
    p.add_argument("paths", nargs="+")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--context", type=int, default=64)
    args = p.parse_args(argv)
    for path in args.paths:
        profile(path, args.rounds, args.context)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
