"""`python -m bench.handover_memory`: memory while prompts join a busy batch (issue #47).

Before prompts were staged in slot rows (engine/staged_rows.py), a prompt was prefilled
into a buffer of its own, then copied into a row of the decoding batch when it joined; the
prompt's buffer stayed as its cached prefix, so its KV was held twice while it decoded
(issue #46 item 14). This bench measures that moment, in one process a tree:

- the bundled model, a KV budget of 4 GiB (nothing is evicted: both trees keep the same
  entries), greedy;
- `--busy` prompts of `--history` tokens of the repo's docs (each from its own offset, no
  shared prefix) submitted at once, run until every one decodes;
- then `--joining` more such prompts, submitted while the first ones decode (they prefill
  and join the busy batch), everything run to the end (`--reply` tokens each).

Prints one JSON line: RSS when the second wave is submitted, the RSS peak while it
prefills and joins (sampled after every tick until every prompt decodes), at the end, and
over the whole run; MLX's
peak of allocated memory in that window (mx.get_peak_memory after a reset); the KV the
prefix cache holds when the wave has joined and at the end. Compare two trees:

    cd BEFORE && PYTHONPATH=. python -m bench.handover_memory
    cd AFTER && PYTHONPATH=. python -m bench.handover_memory
"""

from __future__ import annotations

import argparse
import json
import os

BUDGET = 4 << 30
MIB = 1 << 20


def run(busy: int, joining: int, history: int, reply: int) -> dict:
    import mlx.core as mx

    from app.process_memory import resident_bytes
    from engine import Engine, EngineConfig, SamplingParams
    from engine.blas import ensure_fast_blas
    from engine.loader import load_model
    from engine.sequence import Status

    from .gguf_parity import default_text

    ensure_fast_blas()
    loaded = load_model("bundled")
    text = loaded.tokenizer.encode(default_text())
    count = busy + joining
    engine = Engine(loaded.model, loaded.tokenizer, eos_token_ids=[],
                    context_length=loaded.context_length,
                    config=EngineConfig(max_concurrent=count, kv_budget_bytes=BUDGET))
    step = max(1, (len(text) - history) // count)
    prompts = [text[i * step:i * step + history] for i in range(count)]
    params = SamplingParams(max_tokens=reply)
    def rss() -> int:
        return resident_bytes(os.getpid()) or 0

    first = [engine.submit(prompt_tokens=p, params=params) for p in prompts[:busy]]
    whole = rss()
    while not all(len(s.tokens) >= 2 for s in first):  # every busy row decodes
        engine.step()
        whole = max(whole, rss())

    rss_submit = rss()
    mx.reset_peak_memory()
    second = [engine.submit(prompt_tokens=p, params=params) for p in prompts[busy:]]
    peak = rss_submit
    core = engine._core  # (a bench may not import engine.testing: its internals directly)
    while any(s.finish_reason is None and len(s.tokens) < 2 for s in second) or any(
            seq.status is Status.PREFILLING for seq in core.by_id.values()):
        engine.step()
        peak = max(peak, rss())
    mlx_peak = mx.get_peak_memory()
    cached_joined = engine.stats().prefix_cached_bytes
    whole = max(whole, peak)
    while engine.has_work():
        engine.step()
        whole = max(whole, rss())
    stats = engine.stats()
    assert all(s.finish_reason == "length" for s in first + second)
    return {"busy": busy, "joining": joining, "history": history, "reply": reply,
            "rss_at_submit_mib": round(rss_submit / MIB),
            "rss_peak_while_joining_mib": round(peak / MIB),
            "rss_end_mib": round(rss() / MIB), "rss_peak_whole_run_mib": round(whole / MIB),
            "mlx_peak_while_joining_mib": round(mlx_peak / MIB),
            "prefix_cached_when_joined_mib": round(cached_joined / MIB, 1),
            "prefix_cached_end_mib": round(stats.prefix_cached_bytes / MIB, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.handover_memory",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", type=int, default=8)
    parser.add_argument("--joining", type=int, default=8)
    parser.add_argument("--history", type=int, default=1500)
    parser.add_argument("--reply", type=int, default=24)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.busy, args.joining, args.history, args.reply)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
